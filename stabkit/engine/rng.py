"""Counter-based coupled randomness.

Every random draw in a paired run is a pure function of a key ``(seed, purpose, *counters)`` — e.g.
``(seed, "clients", pair, round, client)`` or ``(seed, "batch", pair, round, slot, epoch, position)`` —
never of global generator state. Both trajectories of a pair evaluate the same keys, so they see the
same client sample and the same minibatch *positions*; a client swapped into a slot maps the same
uniforms to its own indices. The hash is SplitMix64's finaliser (Steele et al. 2014), applied to the
key words in turn; it is vectorised over numpy ``uint64`` arrays.
"""
from __future__ import annotations

import hashlib

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: a bijective avalanche on uint64."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def _purpose_word(purpose: str) -> np.uint64:
    return np.uint64(int.from_bytes(hashlib.blake2b(purpose.encode(), digest_size=8).digest(), "little"))


def hash_keys(seed: int, purpose: str, *counters) -> np.ndarray:
    """uint64 hash of ``(seed, purpose, *counters)``; counters broadcast like numpy arrays."""
    with np.errstate(over="ignore"):
        h = _mix(np.uint64(seed & 0xFFFFFFFFFFFFFFFF) ^ _purpose_word(purpose))
        for i, c in enumerate(counters):
            c = np.asarray(c, dtype=np.int64).astype(np.uint64)
            h = _mix(h ^ (c + _GOLDEN * np.uint64(i + 1)))
    return np.asarray(h)


def uniform(seed: int, purpose: str, *counters) -> np.ndarray:
    """float64 uniforms in [0, 1), one per broadcast counter tuple (53 random bits each)."""
    return (hash_keys(seed, purpose, *counters) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)


def randint(seed: int, purpose: str, high, *counters) -> np.ndarray:
    """Integers uniform in [0, high) (``high`` broadcasts, so each draw may have its own range)."""
    u = uniform(seed, purpose, *counters)
    return np.minimum(np.floor(u * high), np.asarray(high) - 1).astype(np.int64)


def permutation_keys(seed: int, purpose: str, *counters) -> np.ndarray:
    """Random sort keys: ``argsort`` along the last counter gives a coupled permutation."""
    return hash_keys(seed, purpose, *counters)
