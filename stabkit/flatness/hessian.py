"""Hessian spectrum measures from Hessian-vector products, batched over models.

* :func:`lanczos`: the top ``k`` eigenvalues (largest algebraic: lambda_max, ..., lambda_k) and the smallest
  Ritz value of every model's Hessian by the Lanczos method with full reorthogonalisation (Golub & Van
  Loan, Section 10.1). Convergence is reported per model: the residual ||H y - theta y|| = |beta_j s_j| of every
  top Ritz pair bounds its eigenvalue error; iteration stops once every model's top-k residuals are below
  ``tol`` * |lambda_max| (or at ``max_iter``, or when the Krylov space is exhausted: then exact).
* :func:`hutchinson`: tr(H) = E[z^T H z] with Rademacher probes z, and its standard error over probes.
  The same probes are used for every model (common random numbers: differences between models are
  estimated with less noise than each trace).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

PROBE_BYTES = 64 << 20  # parameter memory of the models one batched Hutchinson HVP carries


@dataclass
class Spectrum:
    """Per model (arrays of length Q): top eigenvalues ``top [Q, k]`` (descending), smallest Ritz value,
    iterations used, relative residuals of lambda_max and lambda_k, whether the Krylov space was exhausted
    (the values are then exact), and whether ``tol`` was met (``converged``, set by :func:`lanczos`; the
    iteration asks :meth:`converged_at` as it goes)."""

    top: np.ndarray
    smallest: np.ndarray
    iterations: np.ndarray
    residual_max: np.ndarray
    residual_k: np.ndarray
    exhausted: np.ndarray
    converged: Optional[np.ndarray] = None

    def converged_at(self, tol: float) -> np.ndarray:
        """Per model: exact, or both relative residuals at most ``tol``."""
        return self.exhausted | ((self.residual_max <= tol) & (self.residual_k <= tol))


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) & 0x7FFFFFFFFFFFFFFF)


def lanczos(hvp, theta: torch.Tensor, k: int = 5, max_iter: int = 60, tol: float = 1e-3,
            seed: int = 0) -> Spectrum:
    """Top-``k`` Hessian eigenvalues of each model ``theta [Q, d]``; ``hvp(theta, v) -> [Q, d]``."""
    Q, d = theta.shape
    max_iter = min(max_iter, d)
    v = torch.randn((Q, d), generator=_generator(seed), dtype=torch.float64).to(theta)
    v = v / v.norm(dim=1, keepdim=True)
    basis = [v]
    alpha = np.zeros((Q, max_iter))
    beta = np.zeros((Q, max_iter))
    size = np.full(Q, max_iter)  # Krylov dimension reached per model (smaller where it broke down)
    active = np.ones(Q, dtype=bool)
    result = None
    for j in range(max_iter):
        w = hvp(theta, basis[j])
        a = (w * basis[j]).sum(1)
        alpha[:, j] = a.cpu().numpy()
        V = torch.stack(basis, 1)  # [Q, j+1, d]
        for _ in range(2):  # full reorthogonalisation, twice is enough (Kahan / Parlett)
            w = w - torch.einsum("qj,qjd->qd", torch.einsum("qjd,qd->qj", V, w), V)
        b = w.norm(dim=1)
        beta[:, j] = b.cpu().numpy()
        scale = np.abs(alpha[:, : j + 1]).max(1) + beta[:, : j + 1].max(1) + 1e-300
        broke = active & (beta[:, j] <= 1e-10 * scale)
        size[broke] = j + 1
        active &= ~broke
        result = _ritz(alpha, beta, np.minimum(size, j + 1), k)
        done = active & result.converged_at(tol)
        size[done] = j + 1  # a converged model's later (zero) rows are not part of its T
        active &= ~done
        if not active.any() or j + 1 == max_iter:
            break
        safe = torch.as_tensor(np.where(active, beta[:, j], 1.0), dtype=w.dtype, device=w.device)
        basis.append(torch.where(torch.as_tensor(active, device=w.device)[:, None], w / safe[:, None],
                                 torch.zeros_like(w)))
    return dataclasses.replace(result, converged=result.converged_at(tol))


def _ritz(alpha: np.ndarray, beta: np.ndarray, size: np.ndarray, k: int) -> Spectrum:
    """Ritz values of each model's tridiagonal T (its first ``size[q]`` rows) and their residuals,
    relative to |lambda_max|; a model whose Krylov space is exhausted has exact Ritz values."""
    Q = alpha.shape[0]
    top = np.full((Q, k), np.nan)
    smallest, res_max, res_k = np.full(Q, np.nan), np.full(Q, np.inf), np.full(Q, np.inf)
    exhausted = np.zeros(Q, dtype=bool)
    for q in range(Q):
        m = int(size[q])
        T = np.diag(alpha[q, :m]) + np.diag(beta[q, : m - 1], 1) + np.diag(beta[q, : m - 1], -1)
        vals, vecs = np.linalg.eigh(T)
        order = np.argsort(vals)[::-1]
        vals, last = vals[order], np.abs(beta[q, m - 1] * vecs[-1, order])
        exhausted[q] = beta[q, m - 1] <= 1e-10 * (np.abs(vals).max() + 1e-300)
        if exhausted[q]:
            last = np.zeros_like(last)
        n = min(k, m)
        top[q, :n] = vals[:n]
        smallest[q] = vals[-1]
        scale = max(abs(vals[0]), 1e-300)
        res_max[q] = last[0] / scale
        res_k[q] = last[n - 1] / scale if n == k else np.inf
        if exhausted[q]:
            res_k[q] = 0.0
    return Spectrum(top, smallest, np.minimum(size, alpha.shape[1]), res_max, res_k, exhausted)


@dataclass
class Trace:
    """Hutchinson estimate per model: ``mean`` and ``se`` (standard error over ``probes``)."""

    mean: np.ndarray
    se: np.ndarray
    probes: int


def hutchinson(obj, theta: torch.Tensor, probes: int = 100, seed: int = 0) -> Trace:
    """tr(H) of each model ``theta [Q, d]`` of objective ``obj`` from ``probes`` Rademacher probes shared by
    all models; several probes go through one batched HVP (``Objective.hvp_many``, ``PROBE_BYTES`` at most)."""
    Q, d = theta.shape
    gen = _generator(seed)
    z = (torch.randint(0, 2, (probes, d), generator=gen) * 2 - 1).to(theta)
    per_call = max(1, min(probes, PROBE_BYTES // max(1, Q * d * theta.element_size())))
    samples = []
    for start in range(0, probes, per_call):
        block = z[start:start + per_call]  # [n, d]: every model sees the same probes
        hv = obj.hvp_many(theta, block[:, None, :].expand(len(block), Q, d))  # [n, Q, d]
        samples.append((hv * block[:, None, :]).sum(-1).cpu().numpy())
    s = np.concatenate(samples)  # [probes, Q]
    se = s.std(0, ddof=1) / np.sqrt(probes) if probes > 1 else np.full(Q, np.nan)
    return Trace(s.mean(0), se, probes)
