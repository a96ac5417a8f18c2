"""Neighbouring federations: what run B of each pair sees differently from run A.

Every perturbation is expressed as a map from logical clients to physical data rows
(``FederatedData``), ``cmap[r, j, c]`` for pair r, trajectory j in {0: A, 1: B}:

* ``client`` / ``population`` (FedSAGD Def. 3.4): B's client i*_r is a held-out client h_r.
* ``client`` / ``active`` (the per-round proofs): populations are equal, but every round one sampled slot
  of B (shared random choice) holds a held-out client from the replacement pool (``active_swap``).
* ``sample`` (Libra Def. 2, Hardt et al.): B's client i*_r is a copy of i*_r with sample j*_r replaced by
  a fresh draw from i*_r's distribution (a sample of its validation split, never trained on). i*_r is
  drawn with probability n_i / n (position uniform over all pooled samples, Libra App. C).
* ``remove-client`` (leave-one-out, e.g. federated unlearning's exact retrain): B's federation is the M - 1
  clients without i*_r (the client ``population`` mode swaps, so the two neighbours are comparable).
  Coupling: S_t is the first s entries of a uniform random permutation of the M clients
  (``stabkit.engine.sampling.client_order``); B's cohort is the first s entries of the *same* permutation
  with i*_r deleted, i.e. A's cohort, except that when A samples i*_r, B's slot of i*_r holds the client
  after A's cohort in the permutation: a uniformly drawn client A did not sample. Deleting an element from
  a uniform permutation leaves a uniform permutation of the rest, so B's cohorts are exactly uniform
  s-subsets of the M - 1 clients (pinned by ``tests/engine/test_removal.py``), and every other slot, its
  minibatches and its state are A's. Needs s <= M - 1. Algorithms that scale by the population
  (SCAFFOLD's and FedDyn's s/M) read B's M - 1 (``RoundContext.num_clients``), and B's objective is the mean
  over its M - 1 clients.
* ``remove-sample``: B's client i*_r (the client and position ``sample`` replaces) is its data with sample
  j*_r deleted (n - 1 samples). Its minibatches follow A's epoch permutations with j*_r left out
  (``stabkit.engine.sampling.batch_positions``), and its loss F_i is the mean over its n - 1 samples.
  Aggregation is the cohort's uniform mean (every built-in algorithm), so no example weight changes.
* ``none``: the null pair.

Held-out clients are split in two pools: the first half replaces clients, the second half is never
seen by either run and estimates the unparticipating-client risk R_u.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stabkit.engine import rng
from stabkit.errors import ConfigError
from stabkit.tasks.base import Task


@dataclass
class Neighbours:
    cmap: np.ndarray  # [R, 2, M] logical client -> physical row (-1: not in that trajectory's federation)
    extra: list  # [(x, y, origin)] rows appended to the task's clients
    replacement_pool: np.ndarray  # physical rows that may replace a client
    unseen_pool: np.ndarray  # physical rows never trained on (R_u)
    perturbed_client: np.ndarray  # [R] logical client that differs (-1: none / active mode)
    perturbed_row: np.ndarray  # [R] B's physical row of that client (-1 if none)
    perturbed_position: np.ndarray  # [R] replaced sample index (sample mode; else -1)
    mode: str  # "none" | "population" | "active" | "sample" | "remove-client" | "remove-sample"

    @property
    def population(self) -> np.ndarray:
        """``[R, 2]`` the number of clients in each trajectory's federation (M, or M - 1 for a removal)."""
        return (self.cmap >= 0).sum(axis=2)


def build_neighbours(task: Task, perturb: str, client_mode: str, pairs: int, seed: int) -> Neighbours:
    M, H = task.num_train_clients, task.num_heldout_clients
    n_repl = (H + 1) // 2
    replacement_pool = np.arange(M, M + n_repl)
    unseen_pool = np.arange(M + n_repl, M + H)
    cmap = np.broadcast_to(np.arange(M), (pairs, 2, M)).copy()
    none = np.full(pairs, -1, dtype=np.int64)
    mode = {"none": "none", "client": client_mode}.get(perturb, perturb)
    extra, client, row, position = [], none.copy(), none.copy(), none.copy()
    if mode in ("population", "remove-client"):
        client = _perturbed_clients(seed, M, pairs)
        if mode == "population":
            row = replacement_pool[np.arange(pairs) % n_repl]
        cmap[np.arange(pairs), 1, client] = row  # remove-client: -1, B has no such client
    elif mode in ("sample", "remove-sample"):
        client, position = _perturbed_samples(task, seed, pairs, mode)
        for r in range(pairs):
            i, j = int(client[r]), int(position[r])
            x, y = task.train_x[i].copy(), task.train_y[i].copy()
            if mode == "sample":
                k = int(rng.randint(seed, "replacement-sample", len(task.val_x[i]), r))
                x[j], y[j] = task.val_x[i][k], task.val_y[i][k]
            else:
                x, y = np.delete(x, j, axis=0), np.delete(y, j, axis=0)
            row[r] = task.num_clients + r
            extra.append((x, y, i))
            cmap[r, 1, i] = row[r]
    return Neighbours(cmap, extra, replacement_pool, unseen_pool, client, row, position, mode)


def _perturbed_clients(seed: int, M: int, pairs: int) -> np.ndarray:
    """i*_r of ``population`` and ``remove-client``: pairs take the clients of one random order in turn."""
    order = np.argsort(rng.hash_keys(seed, "perturbed-client", np.arange(M)), kind="stable")
    return order[np.arange(pairs) % M]


def _perturbed_samples(task: Task, seed: int, pairs: int, mode: str) -> tuple:
    """``(i*_r, j*_r)`` of ``sample`` and ``remove-sample``: a position uniform over all pooled training samples
    (client i with probability n_i / n). Removing the only sample of a client is refused."""
    sizes = np.array([len(a) for a in task.train_x[:task.num_train_clients]])
    pooled = rng.randint(seed, "perturbed-sample", sizes.sum(), np.arange(pairs))
    client = np.searchsorted(np.cumsum(sizes), pooled, side="right")
    position = pooled - (np.cumsum(sizes) - sizes)[client]
    if mode == "remove-sample" and (sizes[client] < 2).any():
        r = int(np.flatnonzero(sizes[client] < 2)[0])
        raise ConfigError(f"invalid perturb='remove-sample': pair {r}'s drawn client {int(client[r])} has one "
                          f"training sample, and a client without data cannot train; use a task whose clients "
                          f"hold at least 2 samples each")
    return client, position


def removed_cohort(removed: np.ndarray, S: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``remove-client``: B's clients ``[R, s]`` in round t from A's cohort S_t ``[R, s]``, the permutation
    ``order [R, M]`` it is the head of and each pair's ``removed`` client ``[R]``: the removed client's slot
    takes ``order[:, s]``, the first client A did not sample (a uniform draw among them); every other slot keeps
    A's client."""
    s = S.shape[1]
    rows = S.copy()
    out = S == removed[:, None]
    rows[out] = np.broadcast_to(order[:, s:s + 1], S.shape)[out]
    return rows


def active_swap(nb: Neighbours, seed: int, t: int, s: int):
    """Active mode, round t: the slot of B that is swapped ``[R]`` and the held-out row it gets ``[R]``."""
    R = nb.cmap.shape[0]
    slot = rng.randint(seed, "active-slot", s, np.arange(R), t)
    row = nb.replacement_pool[rng.randint(seed, "active-client", len(nb.replacement_pool), np.arange(R), t)]
    return slot, row
