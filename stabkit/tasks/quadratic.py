"""Quadratic: per-client least squares whose problem constants are known in closed form.

All clients share the Hessian H = Q diag(eigs) Q^T with eigenvalues log-spaced in [1/condition, 1],
so L = 1 and mu = 1/condition. Client i's design is A_i = sqrt(n) U_i H^{1/2} with U_i having
orthonormal columns (A_i^T A_i / n = H exactly) and its targets b_i = A_i x_i* + e_i, where the noise
e_i is projected off range(A_i). Then F_i(x) = ||A_i x - b_i||^2 / (2n) has gradient exactly
H (x - x_i*), the global objective f = mean_i F_i is minimised at xbar* = mean_i x_i*, and the
gradient dissimilarity grad F_i - grad f = H (xbar* - x_i*) does not depend on x.
"""
from __future__ import annotations

import math

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import require
from stabkit.tasks.base import Task


def _hessian_root(dim: int, condition: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Return (H, H^{1/2}) with a random eigenbasis and eigenvalues log-spaced in [1/condition, 1]."""
    q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    eigs = np.logspace(-math.log10(condition), 0.0, dim)
    return (q * eigs) @ q.T, (q * np.sqrt(eigs)) @ q.T


def _samples(h_root: np.ndarray, x_opt: np.ndarray, n: int, noise: float,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows (a_j, b_j) whose empirical loss has Hessian H and minimiser ``x_opt`` exactly (n >= dim)."""
    u, _ = np.linalg.qr(rng.standard_normal((n, len(x_opt))))
    a = math.sqrt(n) * u @ h_root
    e = noise * rng.standard_normal(n)
    e -= u @ (u.T @ e)
    return a, a @ x_opt + e


def _float32(pairs: list) -> tuple[list, list]:
    """Split (a, b) pairs into float32 design and target lists."""
    return [a.astype(np.float32) for a, _ in pairs], [b.astype(np.float32) for _, b in pairs]


def data_bytes(opts: TaskOptions) -> int:
    """Bytes of the float32 rows ``build_quadratic`` generates plus its float64 Hessian and root (checked
    before generating them)."""
    n, n_val = opts.samples_per_client, max(opts.quad_dim, math.ceil(opts.val_fraction * opts.samples_per_client))
    samples = (opts.clients + opts.heldout_clients) * (n + n_val) + opts.clients * n_val
    return samples * (opts.quad_dim + 1) * 4 + 2 * opts.quad_dim ** 2 * 8


def build_quadratic(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Build M + H least-squares clients and their exact constants.

    Every client has ``samples_per_client`` training rows; val rows (``max(quad_dim,
    ceil(val_fraction * samples_per_client))`` per client) are fresh draws around the same x_i*. The
    test split concatenates one such fresh draw per *training* client, i.e. it follows the training
    population's distribution. Arrays are float32; ``constants`` come from the float64 generating
    quantities (``f_star`` is evaluated on the stored arrays), exact up to float32 rounding.
    """
    dim, n = opts.quad_dim, opts.samples_per_client
    require(n >= dim, "samples_per_client", n, f"at least quad_dim={dim} for the quadratic task")
    n_val = max(dim, math.ceil(opts.val_fraction * n))
    hess, h_root = _hessian_root(dim, opts.quad_condition, rng)
    x_base = rng.standard_normal(dim) / math.sqrt(dim)
    total = opts.clients + opts.heldout_clients
    optima = x_base + opts.quad_heterogeneity / math.sqrt(dim) * rng.standard_normal((total, dim))
    train = [_samples(h_root, x, n, opts.quad_noise, rng) for x in optima]
    val = [_samples(h_root, x, n_val, opts.quad_noise, rng) for x in optima]
    test = [_samples(h_root, x, n_val, opts.quad_noise, rng) for x in optima[:opts.clients]]

    train_x, train_y = _float32(train)
    val_x, val_y = _float32(val)
    test_x, test_y = _float32(test)
    x_star = optima[:opts.clients].mean(axis=0)
    f_star = np.mean([np.sum((a.astype(np.float64) @ x_star - b) ** 2) / (2 * n)
                      for a, b in zip(train_x[:opts.clients], train_y[:opts.clients])])
    dissimilarity = np.sum(((optima[:opts.clients] - x_star) @ hess) ** 2, axis=1)  # ||grad F_i - grad f||^2
    sigma_g2, sigma_g2_mean = dissimilarity.max(), dissimilarity.mean()
    return Task(
        name="quadratic", kind="regression", num_classes=0, input_shape=(dim,),
        train_x=train_x, train_y=train_y,
        val_x=val_x, val_y=val_y, test_x=np.concatenate(test_x), test_y=np.concatenate(test_y),
        num_train_clients=opts.clients, default_model="linear",
        constants={"L": 1.0, "mu": 1.0 / opts.quad_condition, "sigma_g2": float(sigma_g2),
                   "sigma_g2_mean": float(sigma_g2_mean), "convex": True, "x_star": x_star.tolist(),
                   "f_star": float(f_star)},
        description=f"least squares, dim {dim}, condition {opts.quad_condition}, "
                    f"{opts.clients}+{opts.heldout_clients} clients",
    )
