"""The per-instance sensitivity of a DP algorithm's round, measured on the pair (the ``dp_sensitivity`` column).

In round t, trajectory B's aggregate is recomputed from trajectory A's model x_t: only the client that differs
between the two federations can change it (every other client holds the same data, minibatch positions and
start point), so only that client is trained, twice, from x_t^A -- once on A's data, once on B's -- and

    dp_sensitivity_t = || agg(S'; x_t^A) - agg(S; x_t^A) || = || u_B - u_A || / s,

with u the algorithm's uploads (clipped by the DP wrapper) and s the fixed cohort size the mean divides by. This
is the quantity whose worst case 2C/s the accountant assumes (``stabkit.privacy.accountant``). The differing
client's algorithm state (per-client and server) is each trajectory's own. It is measured only in rounds where
the differing client is in the cohort (a slot whose physical rows differ between A and B); elsewhere it is NaN:
its sensitivity had it been sampled is unknown, and the measured epsilon takes the worst case there
(``stabkit.privacy.accountant``). The null pair has no differing client: 0 in every round. Under ``remove-client``
the differing slot holds the removed client in A and its substitute in B, so the measured quantity is that swap's,
not an add/remove one's. A round's extra work is two clients per pair, about 1/s of the round.
"""
from __future__ import annotations

import numpy as np
import torch


def measured_sensitivity(engine, t: int, rows: np.ndarray, idx: torch.Tensor) -> np.ndarray:
    """``[R]`` measured sensitivity of round t from the engine's state before the round (NaN where the
    differing client is not sampled, 0 for the null pair); ``rows`` ``[R, 2, s]`` and ``idx`` the round's rows and minibatch positions."""
    if engine.nb.mode == "none":  # the null pair: no client differs, no round depends on one
        return np.zeros(engine.R)
    out = np.full(engine.R, np.nan)
    differs = rows[:, 0, :] != rows[:, 1, :]
    pairs = np.flatnonzero(differs.any(axis=1))
    if not len(pairs):
        return out
    slot = differs[pairs].argmax(axis=1)
    probe_rows = rows[pairs, :, slot][:, :, None]  # [n, 2, 1]: A's and B's client of the differing slot
    where = (torch.as_tensor(pairs, device=idx.device), slice(None), torch.as_tensor(slot, device=idx.device))
    probe_idx = idx[where][:, :, None]  # their (coupled) minibatch positions
    x_a = engine.x[pairs][:, :1].expand(-1, 2, -1)  # both start from trajectory A's x_t
    ctx, _, step_grad = engine.context(t, pairs, x_a, None, probe_rows, probe_idx)  # no cohort: one probe slot
    uploads = engine.clients_round(ctx, step_grad)[0]["delta"][:, :, 0]
    out[pairs] = ((uploads[:, 1] - uploads[:, 0]).norm(dim=-1) / engine.s).cpu().numpy()
    return out
