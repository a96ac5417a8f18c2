"""Counter-based Gaussian noise for the algorithms' own randomness (DP-FedAvg's server noise).

Each coordinate's standard normal is a pure function of ``(seed, purpose, pair, round, [trajectory,] coordinate)``
(``stabkit.engine.rng``'s keys, two uniforms through the Box-Muller transform), so it does not depend on how the
pairs are chunked, on the device, or on what was drawn before, and a resumed run draws the same noise.

``coupling``: ``coupled`` leaves the trajectory out of the key, so both trajectories of a pair get the same
draw (their difference measures the algorithm alone; the null pair stays exactly 0); ``independent`` keys each
trajectory separately (the decoupled runs a privacy audit needs); ``off`` gives zeros (an audit's noiseless
reference runs).
"""
from __future__ import annotations

import numpy as np
import torch

from stabkit.engine import rng

COUPLINGS = ("coupled", "independent")


def gaussian(seed: int, purpose: str, pairs: np.ndarray, t: int, d: int, coupling: str,
             like: torch.Tensor) -> torch.Tensor:
    """Standard normals ``[len(pairs), 2, d]`` of round ``t`` for the global pair indices ``pairs``, in
    ``like``'s dtype and device."""
    if coupling == "off":
        return like.new_zeros(len(pairs), 2, d)
    traj = np.arange(2 if coupling == "independent" else 1)
    keys = (pairs[:, None, None], t, traj[None, :, None], np.arange(d)[None, None, :])
    u1 = rng.uniform(seed, purpose + "/radius", *keys)
    u2 = rng.uniform(seed, purpose + "/angle", *keys)
    z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)  # u1 < 1: the radius is finite
    out = torch.as_tensor(z, dtype=like.dtype).to(like.device)
    return out.expand(len(pairs), 2, d)
