"""Filter-normalised random directions (Li, Xu, Taylor, Studer & Goldstein, NeurIPS 2018).

A direction d ~ N(0, I) with the model's parameter layout; every filter / row j (the slices along the
first axis of a parameter with at least two dimensions: a conv filter, an FC row) is rescaled to the norm of
the model's own filter, d_j <- d_j ||theta_j|| / ||d_j||; parameters with one dimension (biases and
normalisation weights) get direction 0 ("ignore bias and BN"). The raw draw depends only on the seed and
the index of the direction, so models of different algorithms (same architecture) are looked at along
directions drawn alike, each scaled to its own filters.
"""
from __future__ import annotations

import math

import torch

from stabkit.engine.rng import hash_keys


def direction_seed(seed: int, index: int) -> int:
    return int(hash_keys(seed, "landscape_direction", index)) & 0x7FFFFFFFFFFFFFFF


def filter_normalised(theta: torch.Tensor, shapes: list, seed: int, index: int) -> torch.Tensor:
    """Direction ``index`` of draw ``seed`` for the flat model ``theta [d]`` with parameter ``shapes``."""
    gen = torch.Generator().manual_seed(direction_seed(seed, index))
    raw = torch.randn(theta.shape, generator=gen, dtype=torch.float64).to(theta)
    parts = []
    for r, p, shape in zip(torch.split(raw, _numels(shapes)), torch.split(theta, _numels(shapes)), shapes):
        if len(shape) <= 1:
            parts.append(torch.zeros_like(r))
            continue
        r, p = r.reshape(shape[0], -1), p.reshape(shape[0], -1)
        scale = p.norm(dim=1, keepdim=True) / r.norm(dim=1, keepdim=True).clamp_min(1e-30)
        parts.append((r * scale).reshape(-1))
    return torch.cat(parts)


def _numels(shapes: list) -> list:
    return [math.prod(s) for s in shapes]
