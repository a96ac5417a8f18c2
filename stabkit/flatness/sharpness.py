"""Sharpness of a loss at a point, batched over models and radii (docs/flatness.md, L3).

* SAM sharpness S_r(theta) = max_{||eps|| <= r} F(theta + eps) - F(theta) (Foret et al. 2021, App. A.1 of
  the FedSWA paper), estimated by projected gradient ascent on the ball: eps_0 = r g / ||g|| (SAM's own
  step), then ``steps`` ascent steps with unbounded step size, which project to eps <- r grad F(theta +
  eps) / ||grad F(theta + eps)|| (for a quadratic this is the trust-region fixed point (mu I - H) eps = g
  with mu >= lambda_max). The best value seen is reported, so the estimate is a feasible lower bound of
  the maximum, never below 0 (eps = 0 is feasible).
* Average-direction sharpness A_r(theta) = E_{u ~ unit sphere}[F(theta + r u)] - F(theta), Monte Carlo
  over ``directions`` shared by every model, with its standard error.
"""
from __future__ import annotations

import numpy as np
import torch

from stabkit.flatness.objective import Objective


def sam_sharpness(obj: Objective, theta: torch.Tensor, radii: tuple, steps: int = 10,
                  seed: int = 0) -> np.ndarray:
    """S_r for every model and radius: ``[Q, len(radii)]``."""
    Q, d = theta.shape
    n = len(radii)
    big = obj.repeat(n)
    r = torch.as_tensor(np.repeat(radii, Q), dtype=theta.dtype, device=theta.device)[:, None]
    g, f0 = obj.grad(theta)
    gen = torch.Generator().manual_seed(seed)
    fallback = torch.randn((Q, d), generator=gen, dtype=torch.float64).to(theta)
    g = torch.where(g.norm(dim=1, keepdim=True) > 0, g, fallback)
    eps = r * _unit(g.repeat(n, 1))
    base = theta.repeat(n, 1)
    best = torch.zeros(n * Q, dtype=theta.dtype, device=theta.device)
    for _ in range(steps):
        ge, fe = big.grad(base + eps)
        best = torch.maximum(best, fe - f0.repeat(n))
        eps = r * _unit(torch.where(ge.norm(dim=1, keepdim=True) > 0, ge, eps))
    best = torch.maximum(best, big.loss(base + eps) - f0.repeat(n))
    return best.reshape(n, Q).T.cpu().numpy()


def average_sharpness(obj: Objective, theta: torch.Tensor, radii: tuple, directions: int = 20,
                      seed: int = 0) -> tuple:
    """A_r for every model and radius and its standard error: two ``[Q, len(radii)]`` arrays."""
    Q, d = theta.shape
    f0 = obj.loss(theta)
    gen = torch.Generator().manual_seed(seed)
    n = len(radii)
    big, base = obj.repeat(n), theta.repeat(n, 1)
    r = torch.as_tensor(np.repeat(radii, Q), dtype=theta.dtype, device=theta.device)[:, None]
    samples = []
    for _ in range(directions):  # one direction shared by every model and radius
        u = _unit(torch.randn(d, generator=gen, dtype=torch.float64).to(theta))
        samples.append((big.loss(base + r * u) - f0.repeat(n)).reshape(n, Q).T.cpu().numpy())
    s = np.stack(samples)  # [directions, Q, radii]
    se = s.std(0, ddof=1) / np.sqrt(directions) if directions > 1 else np.full(s.shape[1:], np.nan)
    return s.mean(0), se


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm(dim=-1, keepdim=True)
