"""Loss surfaces: train and test loss of the models center + coords @ basis, on a grid or a line.

* :func:`random_plane`: f(a, b) = loss(theta + a d1 + b d2) on [-span, span]^2 with filter-normalised
  directions (Li et al. 2018; docs/flatness.md, L1), and the 1-D slices f(a, 0) with their curvature at 0;
* :func:`model_plane`: the plane through the server model spanned by the first two principal directions
  of the client models' offsets θ_{i,K} - θ_t, with every client (and any extra model) projected onto it
  as a dot, on a grid covering the projections with a margin (L2, Fig. 1(f) / Fig. 2 style);
* :func:`segment`: the line through two models, x + s (x' - x), e.g. the two trajectories of a pair.

Every surface has two layers: the trajectory's training objective and the test loss.
"""
from __future__ import annotations

import numpy as np
import torch

from stabkit.flatness.directions import filter_normalised
from stabkit.flatness.objective import Objective

GROUP_BYTES = 64 << 20  # parameter memory of the grid points evaluated in one call


class Layers:
    """Train objective (``train``: one model's objective, Q = 1) and test loss of many models."""

    def __init__(self, train: Objective, test_x: torch.Tensor, test_y: torch.Tensor):
        self.train, self.test_x, self.test_y = train, test_x, test_y
        self.flops = train.flops + train.model.flops_per_sample(test_x[:1], test_y[:1]) * len(test_x)

    @torch.no_grad()
    def __call__(self, center: torch.Tensor, basis: torch.Tensor, coords: np.ndarray) -> dict:
        """Losses of center + coords @ basis for ``coords [G, k]``, ``basis [k, d]``: {train, test} ``[G]``."""
        model = self.train.model
        c = torch.as_tensor(coords, dtype=center.dtype, device=center.device)
        group = max(1, GROUP_BYTES // max(1, center.numel() * center.element_size()))
        train, test = [], []
        for i in range(0, len(c), group):
            theta = center + c[i:i + group] @ basis
            train.append(self.train.repeat(len(theta)).loss(theta))
            test.append(model.losses(theta, self.test_x, self.test_y)[0].mean(1))
        return {"train": torch.cat(train).cpu().numpy(), "test": torch.cat(test).cpu().numpy()}


def grid(values_a: np.ndarray, values_b: np.ndarray) -> np.ndarray:
    """All (a, b) pairs, b-major: reshape results to ``[len(b), len(a)]``."""
    a, b = np.meshgrid(values_a, values_b)
    return np.stack([a.ravel(), b.ravel()], 1)


def random_plane(layers: Layers, theta: torch.Tensor, shapes: list, seed: int, points: int, span: float,
                 orthogonalise: bool = False) -> dict:
    """The 2-D surface and its 1-D slice f(a, 0) around ``theta [d]``."""
    d1 = filter_normalised(theta, shapes, seed, 0)
    d2 = filter_normalised(theta, shapes, seed, 1)
    if orthogonalise:
        d2 = d2 - (d2 @ d1) / (d1 @ d1) * d1
    axis = np.linspace(-span, span, points)
    values = layers(theta, torch.stack([d1, d2]), grid(axis, axis))
    surface = {k: v.reshape(points, points) for k, v in values.items()}
    mid = points // 2
    line = {k: v[mid] for k, v in surface.items()} if points % 2 else layers(theta, d1[None], axis[:, None])
    h = axis[1] - axis[0]
    zero = int(np.argmin(np.abs(axis)))
    curv = {k: float((v[zero + 1] - 2 * v[zero] + v[zero - 1]) / h ** 2) for k, v in line.items()}
    return {"a": axis, "b": axis, "surface": surface, "slice": line, "curvature_d1": curv,
            "direction_norms": [float(d1.norm()), float(d2.norm())], "theta_norm": float(theta.norm()),
            "direction_cosine": float(d1 @ d2 / (d1.norm() * d2.norm()))}


def model_plane(layers: Layers, server: torch.Tensor, clients: torch.Tensor, extra: dict, points: int,
                margin: float = 0.3) -> dict:
    """Surface on the plane through ``server [d]`` spanned by the top two principal directions of
    ``clients [s, d]`` - server; ``extra``: name -> model [d] also projected (e.g. the other trajectory)."""
    offsets = clients - server
    _, sing, vh = torch.linalg.svd(offsets, full_matrices=False)
    basis = vh[:2]
    if len(basis) < 2:  # one client: complete the plane with a direction orthogonal to it
        other = torch.roll(basis[0], 1)
        other = other - (other @ basis[0]) * basis[0]
        basis = torch.stack([basis[0], other / other.norm()])
    proj = (offsets @ basis.T).cpu().numpy()
    resid = ((offsets - (offsets @ basis.T) @ basis).norm(dim=1) / offsets.norm(dim=1).clamp_min(1e-30))
    dots = {"clients": proj, "server": np.zeros(2), "client_mean": proj.mean(0)}
    for name, model in extra.items():
        dots[name] = ((model - server) @ basis.T).cpu().numpy()
    every = np.vstack([proj, np.zeros((1, 2))] + [np.atleast_2d(v) for k, v in dots.items() if k not in ("clients",)])
    lo, hi = every.min(0), every.max(0)
    pad = margin * max(float((hi - lo).max()), 1e-12)
    axes = [np.linspace(lo[i] - pad, hi[i] + pad, points) for i in range(2)]
    values = layers(server, basis, grid(axes[0], axes[1]))
    at_dots = layers(server, basis, np.vstack([proj, np.zeros((1, 2))]))
    return {"a": axes[0], "b": axes[1], "surface": {k: v.reshape(points, points) for k, v in values.items()},
            "dots": dots, "client_residual": resid.cpu().numpy(), "singular_values": sing.cpu().numpy(),
            "loss_at_clients": at_dots["train"][:-1], "loss_at_server": float(at_dots["train"][-1]),
            "mean_client_distance": float(offsets.norm(dim=1).mean())}


def segment(layers: Layers, x: torch.Tensor, other: torch.Tensor, lo: float, hi: float, points: int) -> dict:
    """Losses along x + s (other - x) for s in [lo, hi]."""
    s = np.linspace(lo, hi, points)
    return {"s": s, **layers(x, (other - x)[None], s[:, None]), "distance": float((other - x).norm())}
