"""Fixed evaluation subsets: the cheaper-evaluation knob ``--eval-fraction``.

Per-round evaluation computes every model's loss and full gradient on all training data, which on the
default digits run costs about as much as the round itself (its FLOPs are 1.5x the round's). With
``eval_fraction`` f < 1 the metrics are computed on a fixed subset instead: the first ceil(f n) samples
of each client in a random order keyed on (seed, client, position) -- so a neighbour client that
differs in one sample keeps the same positions, both runs of a pair are evaluated on the same samples,
and every round uses the same subset (the curves stay smooth and paired) -- and likewise ceil(f N) of
the test set. f = 1 keeps everything in its original order.
"""
from __future__ import annotations

import math

import numpy as np

from stabkit.engine.rng import permutation_keys


def keep_per_owner(owner: np.ndarray, origin_of_owner: np.ndarray, fraction: float, seed: int,
                   purpose: str) -> np.ndarray:
    """Indices (sorted) of the samples kept: per owner, ceil(fraction * n) of its samples (at least 1).

    ``owner [N]`` is each sample's owner (samples of one owner contiguous, as in the flat stores);
    ``origin_of_owner`` the task client each owner derives from (the key of its order).
    """
    if fraction >= 1.0:
        return np.arange(len(owner))
    kept = []
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    for start, end in zip(starts, np.r_[starts[1:], len(owner)]):
        n = end - start
        keys = permutation_keys(seed, purpose, origin_of_owner[owner[start]], np.arange(n))
        kept.append(start + np.sort(np.argsort(keys, kind="stable")[: max(1, math.ceil(fraction * n))]))
    return np.concatenate(kept)


def keep_of(n: int, fraction: float, seed: int, purpose: str) -> np.ndarray:
    """Indices (sorted) of ceil(fraction * n) samples of a shared split such as the test set."""
    return keep_per_owner(np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64), fraction, seed, purpose)
