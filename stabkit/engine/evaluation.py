"""Per-round evaluation of both trajectories of every pair.

For each global model (pair r, trajectory j) on its own federation:

* ``train_loss`` / ``train_acc``: f(x) = (1/M) sum_i F_i(x) over the trajectory's training population
  (client-uniform weights, the papers' objective; partitions are balanced so it equals the pooled mean),
  and ``grad_norm_sq`` = ||grad f(x)||^2 on the same full training data;
* ``test_loss`` / ``test_acc`` on the test split and ``gap`` = test loss - train loss;
* ``part_loss`` / ``part_acc``: training loss on the clients that took part in the round;
* ``r_e`` (semi-empirical risk, FedSAGD eq. 2): mean over the round's clients of the loss on their own
  held-out (validation) data; ``r_u``: mean loss on held-out clients neither run ever trains on;
  ``client_gap`` = r_u - r_e.

All models are evaluated in one batched call per data split (in memory-bounded chunks), on all the data
or, with ``eval_fraction`` < 1, on a fixed subset of every client's data and of the test set.
"""
from __future__ import annotations

import numpy as np
import torch

from stabkit.engine.data import FederatedData
from stabkit.engine.evalsubset import keep_of, keep_per_owner
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.perturbation import Neighbours
from stabkit.engine.threads import threads_for


def _segment_mean(values: torch.Tensor, owner: torch.Tensor, num: int) -> torch.Tensor:
    """Mean of ``values [Q, N]`` per owner id -> ``[Q, num]`` (NaN where an owner has no samples)."""
    total = torch.zeros(values.shape[0], num, dtype=values.dtype, device=values.device)
    total.index_add_(1, owner, values)
    count = torch.bincount(owner, minlength=num).to(values.dtype)
    return total / count


class Evaluator:
    """Evaluates ``x [R, 2, d]``; the train weights depend only on each trajectory's population."""

    def __init__(self, model: FlatModel, data: FederatedData, nb: Neighbours, fraction: float = 1.0,
                 seed: int = 0):
        """``fraction`` < 1: every metric on a fixed subset of the data (``stabkit.engine.evalsubset``)."""
        self.model, self.data, self.nb = model, data, nb
        dev = data.flat_x.device
        R, _, M = nb.cmap.shape

        def subset(tensors: tuple, keep) -> tuple:  # all the data is used as is, without a copy
            if fraction >= 1:
                return tensors
            keep = torch.as_tensor(keep(), device=dev)
            return tuple(t[keep] for t in tensors)

        self.train = subset((data.flat_x, data.flat_y, data.flat_owner), lambda: keep_per_owner(
            data.flat_owner.cpu().numpy(), data.origin, fraction, seed, "eval_train"))
        self.val = subset((data.val_x, data.val_y, data.val_owner), lambda: keep_per_owner(
            data.val_owner.cpu().numpy(), np.arange(data.num_task_clients), fraction, seed, "eval_val"))
        self.test = subset((data.test_x, data.test_y),
                           lambda: keep_of(len(data.test_y), fraction, seed, "eval_test"))
        owner = self.train[2]
        sizes = torch.bincount(owner, minlength=data.num_rows).to(data.dtype)
        member = torch.zeros(R * 2, data.num_rows, dtype=data.dtype, device=dev)
        member[torch.arange(R * 2)[:, None], torch.as_tensor(nb.cmap.reshape(R * 2, M))] = 1.0
        self.train_w = (member / (M * sizes))[:, owner]  # [2R, N]
        self.member, self.M = member, M
        self.origin = torch.as_tensor(data.origin, device=dev)
        self.unseen = torch.as_tensor(nb.unseen_pool, device=dev)
        self.threads = None  # intra-op threads of large ops (None: torch's), set by the run
        self.flops = model.flops_per_sample(data.x[0, :1], data.y[0, :1]) * R * 2 * len(owner)

    def population_weights(self, q: int) -> torch.Tensor:
        """Weights ``[N]`` over *all* flat training samples (not the evaluation subset) with which
        sum_n w_n loss_n = f(x) = (1/M) sum_i F_i(x) for model q (pair q // 2, trajectory q % 2)."""
        data = self.data
        return (self.member[q] / (self.M * data.n.to(data.dtype)))[data.flat_owner]

    def evaluate(self, x: torch.Tensor, rows: np.ndarray | None) -> dict:
        """Metrics ``name -> [R, 2]`` numpy arrays; ``rows [R, 2, s]`` are the last round's clients."""
        with threads_for(self.flops, self.threads):
            return self._evaluate(x, rows)

    @torch.no_grad()
    def _evaluate(self, x: torch.Tensor, rows: np.ndarray | None) -> dict:
        R, _, d = x.shape
        m, data = self.model, self.data
        theta = x.reshape(R * 2, d)
        train_x, train_y, owner = self.train
        with torch.enable_grad():
            g, losses, correct = m.evaluate(theta, train_x, train_y, self.train_w)
        out = {
            "train_loss": (losses * self.train_w).sum(1),
            "train_acc": (correct * self.train_w).sum(1),
            "grad_norm_sq": g.pow(2).sum(1),
        }
        test_losses, test_correct = m.losses(theta, *self.test)
        out["test_loss"], out["test_acc"] = test_losses.mean(1), test_correct.mean(1)
        out["gap"] = out["test_loss"] - out["train_loss"]
        row_loss = _segment_mean(losses, owner, data.num_rows)
        out["r_u"] = row_loss[:, self.unseen].mean(1)
        if rows is not None:
            rows_t = torch.as_tensor(rows.reshape(R * 2, -1), device=x.device)
            row_acc = _segment_mean(correct, owner, data.num_rows)
            out["part_loss"] = row_loss.gather(1, rows_t).mean(1)
            out["part_acc"] = row_acc.gather(1, rows_t).mean(1)
            val_x, val_y, val_owner = self.val
            val_losses, _ = m.losses(theta, val_x, val_y)
            val_loss = _segment_mean(val_losses, val_owner, data.num_task_clients)
            out["r_e"] = val_loss.gather(1, self.origin[rows_t]).mean(1)
            out["client_gap"] = out["r_u"] - out["r_e"]
        return {k: v.reshape(R, 2).cpu().numpy() for k, v in out.items()}
