"""Coupled data augmentation: random crop (zero padding) and horizontal flip for image minibatches.

Each augmented sample's draw is keyed by ``(seed, pair, round, slot, local step, batch position)`` —
never by the trajectory — so both runs of a pair apply the same crop and flip at the same position, and a
paired run stays coupled: the perturbation remains the only difference. Augmentation applies to local
minibatches only (not to full-batch steps, evaluation or constant estimation). ``none`` is the default,
as in the papers' reference code.
"""
from __future__ import annotations

import numpy as np
import torch

from stabkit.engine import rng

PAD = 4  # pixels of zero padding before the random crop (the standard CIFAR recipe)


def crop_flip(x: torch.Tensor, seed: int, t: int, steps: np.ndarray) -> torch.Tensor:
    """Augment ``x [K, R, 2, s, B, C, H, W]``: step k of the leading axis is local step ``steps[k]``."""
    K, R, _, s, B, C, H, W = x.shape
    key = (np.asarray(steps)[:, None, None, None], np.arange(R)[None, :, None, None], t,
           np.arange(s)[None, None, :, None], np.arange(B)[None, None, None, :])
    flip = torch.as_tensor(rng.uniform(seed, "augment-flip", *key) < 0.5, device=x.device)
    dy = torch.as_tensor(rng.randint(seed, "augment-dy", 2 * PAD + 1, *key), device=x.device)
    dx = torch.as_tensor(rng.randint(seed, "augment-dx", 2 * PAD + 1, *key), device=x.device)
    # the same draw for both trajectories: broadcast [K, R, s, B] over the trajectory axis
    flip, dy, dx = (v[:, :, None].expand(K, R, 2, s, B).reshape(-1) for v in (flip, dy, dx))
    padded = torch.nn.functional.pad(x.reshape(-1, C, H, W), (PAD, PAD, PAD, PAD))
    n = padded.shape[0]
    rows = (dy[:, None] + torch.arange(H, device=x.device))[:, None, :, None]
    cols = (dx[:, None] + torch.arange(W, device=x.device))[:, None, None, :]
    out = padded[torch.arange(n, device=x.device)[:, None, None, None],
                 torch.arange(C, device=x.device)[None, :, None, None], rows, cols]
    out = torch.where(flip[:, None, None, None], out.flip(-1), out)
    return out.reshape(x.shape)
