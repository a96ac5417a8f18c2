"""The retraining noise floor: how far apart two retrains without the forgotten client land when they differ
only in their seed.

Each of ``K`` floor retrains is trajectory B of the run again (the same initial model x_0, the same
forgotten client, the run's algorithm and hyperparameters) under a fresh seed of the coupled streams, so its
cohorts, minibatches and any algorithm noise are new draws. The floor of pair r is the mean over the K
retrains of ||x_T^{B,k} - x_T^B||: a method whose distance to the coupled retrain is below it is closer to
that retrain than an equally good retrain with other randomness is. The initial model is kept, so the floor is
the spread of training itself (a fresh initialisation would add the spread of x_0 for nonconvex models).
Cost: K times the run's training.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from stabkit.engine import rng
from stabkit.errors import require
from stabkit.run.loop import EngineRounds, run_rounds

if TYPE_CHECKING:
    import torch

FLOOR_SEEDS_MAX = 64  # more retrains than this are refused with the time they would take


def floor_seed(seed: int, k: int) -> int:
    """The seed of floor retrain k (a coupled-stream draw: never the run's own)."""
    return int(rng.hash_keys(seed, "floor-seed", k)) >> 1


def check_floor_seeds(k, train_s: float) -> None:
    """Refuse a floor of ``k`` retrains unless 1 <= k <= FLOOR_SEEDS_MAX, naming what it would cost (the run
    trained in ``train_s`` seconds)."""
    require(isinstance(k, int) and not isinstance(k, bool) and k >= 1, "floor_seeds", k,
            "a positive number of retrains (each one costs the run's training again)")
    require(k <= FLOOR_SEEDS_MAX, "floor_seeds", k,
            f"at most {FLOOR_SEEDS_MAX}: {k} retrains would take about {k * train_s:.0f} s (the run trained in "
            f"{train_s:.1f} s); 4-16 seeds give the floor to within a few tens of percent")


def retrain_floor(ctx, x_retrain: torch.Tensor, seeds: int) -> np.ndarray:
    """``[R]`` the mean distance of ``seeds`` fresh-seed retrains of B from the coupled retrain ``x_retrain``."""
    total = np.zeros(ctx.pairs)
    for k in range(seeds):
        eng = ctx.engine(ctx.x0, seed=floor_seed(ctx.cfg.seed, k))
        run_rounds(EngineRounds((eng,), ctx.rounds))
        total += (eng.x[:, 1] - x_retrain).norm(dim=-1).cpu().numpy()
    return total / seeds
