"""``federaser``: FedEraser's calibrated reconstruction from stored client updates (Liu et al., "FedEraser:
Enabling Efficient Client-Level Data Removal from Federated Learning Models", IWQoS 2021, Sec. IV).

The server kept every client update U_i^t = y_i^t - x_{t-1} of trajectory A (``--store-updates``). FedEraser
rebuilds the model from x_0 using the rounds t_j = 1, 1 + Δ, 1 + 2Δ, ... (``interval`` Δ): in round t_j every
remaining client i of A's cohort (the forgotten one left out) trains ``ceil(ratio * K)`` local steps from the
current model x~_j (its calibration training, plain local SGD at the round's lr), giving Û_i, and the server
takes the stored update's length along the new direction,

    U~_i = ||U_i^{t_j}|| * Û_i / ||Û_i||,        x~_{j+1} = x~_j + η · mean_i U~_i

(η the run's server lr; the mean is the cohort's uniform mean the run's aggregation uses, where the paper
weights by data size). A round whose cohort held only the forgotten client leaves the model as it is. Cost:
the calibration steps, sum_j |cohort_j \\ {i*}| * ceil(ratio * K).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from stabkit.algorithms.base import HParams, hp
from stabkit.unlearn.base import Unlearned, UnlearningMethod

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class FedEraserParams(HParams):
    interval: int = hp(2, "Δ: calibrate with the stored updates of every Δ-th round (1, 1 + Δ, ...)", low=1)
    ratio: float = hp(0.5, "calibration local steps as a fraction of the run's K (rounded up)", low=0.0,
                      high=1.0, low_open=True)


def calibrated(stored: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
    """FedEraser's calibration: the stored updates' lengths ``||U_i||`` along the fresh directions
    ``Û_i / ||Û_i||`` (rows; a zero fresh update stays zero)."""
    norm = fresh.norm(dim=-1, keepdim=True)
    return stored.norm(dim=-1, keepdim=True) * fresh / norm.masked_fill(norm == 0, 1.0)


class FedEraser(UnlearningMethod):
    name = "federaser"
    title = "FedEraser (calibrated stored updates)"
    reference = "Liu et al. 2021, IWQoS, Sec. IV"
    params_cls = FedEraserParams
    needs_updates = True
    integers = ("interval",)

    def unlearn(self, ctx) -> Unlearned:
        k_cal = max(1, math.ceil(self.p.ratio * ctx.local_steps))
        x = ctx.x0.clone()
        steps = np.zeros(ctx.pairs)
        for t in range(1, ctx.rounds + 1, int(self.p.interval)):
            cohort, update = ctx.stored_updates(t)
            keep = cohort != ctx.forgotten[:, None]  # [R, s]
            r_idx, slot = np.nonzero(keep)
            if len(r_idx) == 0:
                continue
            fresh = ctx.local_sgd(x[r_idx], cohort[r_idx, slot], k_cal, ctx.lr(t - 1), ("federaser", t)) - x[r_idx]
            cal = calibrated(update[r_idx, slot], fresh)
            total = x.new_zeros(x.shape).index_add_(0, x.new_tensor(r_idx).long(), cal)
            count = x.new_tensor(keep.sum(1))[:, None]
            x = x + ctx.cfg.global_lr * total / count.clamp(min=1)
            steps += keep.sum(1) * k_cal
        return Unlearned(x, steps)
