"""Shared machinery of the FedSAGD-paper baselines (fedsagd.md §2.3-§2.10); defines no algorithm.

* ``on_clients``: a server tensor ``[R, 2, d]`` broadcast to the round's clients ``[R, 2, 1, d]``.
* ``sgd_step``: ``y - lr * direction``, recording the lr it used, so that methods that turn a model
  difference back into gradient units (SCAFFOLD's c_i^+, FedCM's Delta) divide by the sum of the lrs of
  the local steps actually taken (K * eta_l for a constant lr) -- never by a step count derived from a
  client's data size (a known SCAFFOLD bug with unequal client sizes).
* ``gradient_units``: ``(start - y_K) / sum_k lr_k``, the mean local update direction of the round.
* ``full_gradient_at_x``: each client's full local gradient at x_t (counted as one gradient evaluation),
  treated like the local gradients (the run's clipping and weight decay), for MimeLite and SCAFFOLD-I.
"""
from __future__ import annotations

import torch

from stabkit.algorithms.base import descend

_LRS = "_lrs_used"


def on_clients(server_tensor: torch.Tensor) -> torch.Tensor:
    return server_tensor[:, :, None, :]


def sgd_step(ctx, y: torch.Tensor, lr: float, direction: torch.Tensor) -> torch.Tensor:
    ctx.local.setdefault(_LRS, []).append(lr)
    return descend(y, lr, direction)


def lr_sum(ctx) -> float:
    """Sum of the local lrs used this round (K * eta_l for a constant lr)."""
    lrs = ctx.local.get(_LRS, [])
    if not lrs:
        raise RuntimeError("no local step was taken through sgd_step this round")
    return float(sum(lrs))


def gradient_units(ctx, start: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (start - y) / lr_sum(ctx)


def full_gradient_at_x(ctx) -> torch.Tensor:
    return ctx.process(ctx.full_grad_fn(ctx.x0), ctx.x0)
