"""Coupled client sampling and minibatch positions (counter-based, see ``stabkit.engine.rng``).

Both trajectories of pair r use the keys ``(seed, pair r, round t, ...)``: the same client sample S_t,
and the same minibatch *positions* per (round, slot, epoch). Positions are an epoch-wise shuffle: the
sort order of per-position random keys, so a swapped-in client with n' samples orders its own
positions 0..n'-1 by the same keys (a client of equal size draws identical indices).
"""
from __future__ import annotations

import math

import numpy as np

from stabkit.engine import rng


def sample_clients(seed: int, t: int, pairs: int, num_clients: int, s: int) -> np.ndarray:
    """S_t for every pair: ``[R, s]`` logical client ids, uniform without replacement."""
    keys = rng.hash_keys(seed, "clients", np.arange(pairs)[:, None], t, np.arange(num_clients)[None, :])
    return np.argsort(keys, axis=1, kind="stable")[:, :s]


def batch_positions(seed: int, t: int, sizes: np.ndarray, local_steps: int, batch: int) -> np.ndarray:
    """Minibatch sample indices ``[R, 2, s, K, B]`` for clients of sizes ``sizes [R, 2, s]``.

    Step k takes positions k*B .. k*B+B-1 of the concatenated epoch permutations of its client. The keys do
    not depend on the trajectory, so where both trajectories' clients are equally large (every perturbation
    that replaces samples) one sort serves both: the same indices, half the work.
    """
    R, _, s = sizes.shape
    if (sizes[:, 0] == sizes[:, 1]).all():
        one = _positions(seed, t, sizes[:, :1], local_steps, batch)
        return np.ascontiguousarray(np.broadcast_to(one, (R, 2, s, local_steps, batch)))
    return _positions(seed, t, sizes, local_steps, batch)


def _positions(seed: int, t: int, sizes: np.ndarray, local_steps: int, batch: int) -> np.ndarray:
    """:func:`batch_positions` for sizes ``[R, T, s]`` of T trajectories."""
    R, T, s = sizes.shape
    n_max = int(sizes.max())
    epochs = math.ceil(local_steps * batch / int(sizes.min()))
    keys = rng.hash_keys(seed, "batch", np.arange(R)[:, None, None, None, None], t,
                         np.arange(s)[None, None, :, None, None], np.arange(epochs)[None, None, None, :, None],
                         np.arange(n_max)[None, None, None, None, :])
    keys = np.broadcast_to(keys, (R, T, s, epochs, n_max)).copy()
    padding = np.broadcast_to(np.arange(n_max) >= sizes[..., None, None], keys.shape)
    keys[padding] = np.iinfo(np.uint64).max  # padding positions sort last
    perm = np.argsort(keys, axis=-1, kind="stable")
    q = np.arange(local_steps * batch)
    n = sizes[..., None]
    idx = np.take_along_axis(perm.reshape(R, T, s, -1), (q // n) * n_max + q % n, axis=-1)
    return idx.reshape(R, T, s, local_steps, batch)
