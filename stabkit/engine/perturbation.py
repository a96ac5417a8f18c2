"""Neighbouring federations: what run B of each pair sees differently from run A.

Every perturbation is expressed as a map from logical clients to physical data rows
(``FederatedData``), ``cmap[r, j, c]`` for pair r, trajectory j in {0: A, 1: B}:

* ``client`` / ``population`` (FedSAGD Def. 3.4): B's client i*_r is a held-out client h_r.
* ``client`` / ``active`` (the per-round proofs): populations are equal, but every round one sampled slot
  of B (shared random choice) holds a held-out client from the replacement pool (``active_swap``).
* ``sample`` (Libra Def. 2, Hardt et al.): B's client i*_r is a copy of i*_r with sample j*_r replaced by
  a fresh draw from i*_r's distribution (a sample of its validation split, never trained on). i*_r is
  drawn with probability n_i / n (position uniform over all pooled samples, Libra App. C).
* ``none``: the null pair.

Held-out clients are split in two pools: the first half replaces clients, the second half is never
seen by either run and estimates the unparticipating-client risk R_u.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stabkit.engine import rng
from stabkit.tasks.base import Task


@dataclass
class Neighbours:
    cmap: np.ndarray  # [R, 2, M] logical client -> physical row
    extra: list  # [(x, y, origin)] rows appended to the task's clients
    replacement_pool: np.ndarray  # physical rows that may replace a client
    unseen_pool: np.ndarray  # physical rows never trained on (R_u)
    perturbed_client: np.ndarray  # [R] logical client that differs (-1: none / active mode)
    perturbed_row: np.ndarray  # [R] B's physical row of that client (-1 if none)
    perturbed_position: np.ndarray  # [R] replaced sample index (sample mode; else -1)
    mode: str  # "none" | "population" | "active" | "sample"


def build_neighbours(task: Task, perturb: str, client_mode: str, pairs: int, seed: int) -> Neighbours:
    M, H = task.num_train_clients, task.num_heldout_clients
    n_repl = (H + 1) // 2
    replacement_pool = np.arange(M, M + n_repl)
    unseen_pool = np.arange(M + n_repl, M + H)
    cmap = np.broadcast_to(np.arange(M), (pairs, 2, M)).copy()
    none = np.full(pairs, -1, dtype=np.int64)
    mode = "none" if perturb == "none" else (client_mode if perturb == "client" else "sample")
    extra, client, row, position = [], none.copy(), none.copy(), none.copy()
    if mode == "population":
        order = np.argsort(rng.hash_keys(seed, "perturbed-client", np.arange(M)), kind="stable")
        client = order[np.arange(pairs) % M]
        row = replacement_pool[np.arange(pairs) % n_repl]
        cmap[np.arange(pairs), 1, client] = row
    elif mode == "sample":
        sizes = np.array([len(a) for a in task.train_x[:M]])
        pooled = rng.randint(seed, "perturbed-sample", sizes.sum(), np.arange(pairs))
        client = np.searchsorted(np.cumsum(sizes), pooled, side="right")
        position = pooled - (np.cumsum(sizes) - sizes)[client]
        for r in range(pairs):
            i = int(client[r])
            n_val = len(task.val_x[i])
            k = int(rng.randint(seed, "replacement-sample", n_val, r))
            x, y = task.train_x[i].copy(), task.train_y[i].copy()
            x[position[r]], y[position[r]] = task.val_x[i][k], task.val_y[i][k]
            row[r] = task.num_clients + r
            extra.append((x, y, i))
            cmap[r, 1, i] = row[r]
    return Neighbours(cmap, extra, replacement_pool, unseen_pool, client, row, position, mode)


def active_swap(nb: Neighbours, seed: int, t: int, s: int):
    """Active mode, round t: the slot of B that is swapped ``[R]`` and the held-out row it gets ``[R]``."""
    R = nb.cmap.shape[0]
    slot = rng.randint(seed, "active-slot", s, np.arange(R), t)
    row = nb.replacement_pool[rng.randint(seed, "active-client", len(nb.replacement_pool), np.arange(R), t)]
    return slot, row
