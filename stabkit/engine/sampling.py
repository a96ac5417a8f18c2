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
    """S_t for every pair: ``[R, s]`` logical client ids, uniform without replacement: the first s entries of
    a uniform random permutation of the clients (the sort order of per-client keys)."""
    return client_order(seed, t, pairs, num_clients)[:, :s]


def client_order(seed: int, t: int, pairs: int, num_clients: int) -> np.ndarray:
    """The uniform random permutation ``[R, M]`` of the clients whose first s entries are S_t (the entry after
    them is the client ``remove-client`` substitutes, ``stabkit.engine.perturbation.removed_cohort``)."""
    keys = rng.hash_keys(seed, "clients", np.arange(pairs)[:, None], t, np.arange(num_clients)[None, :])
    return np.argsort(keys, axis=1, kind="stable")


def batch_positions(seed: int, t: int, sizes: np.ndarray, local_steps: int, batch: int,
                    skip: np.ndarray | None = None) -> np.ndarray:
    """Minibatch sample indices ``[R, 2, s, K, B]`` for clients of sizes ``sizes [R, 2, s]``.

    Step k takes positions k*B .. k*B+B-1 of the concatenated epoch permutations of its client. The keys do
    not depend on the trajectory, so where both trajectories' clients are equally large (every perturbation
    that replaces samples) one sort serves both: the same indices, half the work.

    ``skip [R, 2, s]`` (``remove-sample``): a client whose row is another row's data with the sample at position
    ``skip`` deleted (``skip >= size`` elsewhere) orders its position p by the key of position p + (p >= skip),
    so its epoch permutation is the other row's permutation with the deleted sample left out: a uniform
    permutation of its own samples, coupled to the full row's as tightly as one order can be to another.
    """
    R, _, s = sizes.shape
    if skip is None and (sizes[:, 0] == sizes[:, 1]).all():
        one = _positions(seed, t, sizes[:, :1], local_steps, batch)
        return np.ascontiguousarray(np.broadcast_to(one, (R, 2, s, local_steps, batch)))
    return _positions(seed, t, sizes, local_steps, batch, skip)


_PAD = np.iinfo(np.uint64).max  # the key of a padding position: sorts last


def _positions(seed: int, t: int, sizes: np.ndarray, local_steps: int, batch: int,
               skip: np.ndarray | None = None) -> np.ndarray:
    """:func:`batch_positions` for sizes ``[R, T, s]`` of T trajectories: the first ``K*B`` entries of each
    client's epochs, each epoch its positions ``0..n-1`` in the order of their keys."""
    R, T, s = sizes.shape
    n_max, n_min = int(sizes.max()), int(sizes.min())
    epochs = math.ceil(local_steps * batch / n_min)
    position = np.arange(n_max)[None, None, None, None, :]
    if skip is not None:  # a row with one sample deleted keys its positions from the sample on by the next key
        position = position + (position >= skip[:, :, :, None, None])  # [R, T, s, 1, n_max]
    keys = rng.hash_keys(seed, "batch", np.arange(R)[:, None, None, None, None], t,
                         np.arange(s)[None, None, :, None, None], np.arange(epochs)[None, None, None, :, None],
                         position)  # [R, 1 or T, s, E, n_max]
    exact = bool((keys == _PAD).any())  # a key equal to padding's (chance 2^-64 each): the stable sort decides
    if n_min < n_max:  # padding positions sort last
        keys = np.broadcast_to(keys, (R, T, s, epochs, n_max)).copy()
        keys[np.broadcast_to(np.arange(n_max) >= sizes[..., None, None], keys.shape)] = _PAD
    perm = _stable_argsort(keys.reshape(-1, n_max), exact).reshape(-1, epochs * n_max)  # a row per client (and
    # trajectory where ragged): its epochs' orders one after another
    if n_min < n_max:
        q, n = np.arange(local_steps * batch), sizes.reshape(-1, 1)
        idx = _rows_take(perm, (q // n) * n_max + q % n)  # epoch q // n, its position q % n
    else:  # no padding: the epochs' orders are consecutive
        idx = perm[:, :local_steps * batch]
    idx = idx.reshape(R, -1, s, local_steps, batch)
    return idx if idx.shape[1] == T else np.broadcast_to(idx, (R, T, s, local_steps, batch))


def _rows_take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``take_along_axis(a, idx, axis=1)`` for 2-D arrays, as one flat ``take`` (~8x faster)."""
    return a.ravel().take(idx + np.arange(len(a))[:, None] * a.shape[1])


def _stable_argsort(keys: np.ndarray, exact: bool) -> np.ndarray:
    """``argsort(keys, axis=1, kind="stable")`` of 2-D keys as far as positions are picked from it, by the
    faster unstable sort unless ``exact`` or two keys of a row tie (padding keys, never picked, may tie)."""
    if not exact:
        perm = np.argsort(keys, axis=1)
        ordered = _rows_take(keys, perm)
        if not ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != _PAD)).any():
            return perm
    return np.argsort(keys, axis=1, kind="stable")
