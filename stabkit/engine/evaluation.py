"""Per-round evaluation of both trajectories of every pair.

For each global model (pair r, trajectory j) on its own federation:

* ``train_loss`` / ``train_acc``: f(x) = (1/M) sum_i F_i(x) over the trajectory's training population
  (its own M: run B of a ``remove-client`` pair has M - 1 clients; client-uniform weights, the papers' objective; partitions are balanced so it equals the pooled mean),
  and ``grad_norm_sq`` = ||grad f(x)||^2 on the same full training data;
* ``test_loss`` / ``test_acc`` on the test split and ``gap`` = test loss - train loss;
* ``part_loss`` / ``part_acc``: training loss on the clients that took part in the round;
* ``r_e`` (semi-empirical risk, FedSAGD eq. 2): mean over the round's clients of the loss on their own
  held-out (validation) data; ``r_u``: mean loss on held-out clients neither run ever trains on;
  ``client_gap`` = r_u - r_e;
* ``val_loss`` / ``val_acc``: loss and accuracy on the held-out (validation) samples of the task's training
  clients, pooled, never trained on by trajectory A (the validation split ``stabkit atlas --tune`` picks a
  learning rate by; the test split stays out of every choice).

All models are evaluated in one batched call per data split (in memory-bounded chunks), on all the data
or, with ``eval_fraction`` < 1, on a fixed subset of every client's data and of the test set. A client
that belongs to one model alone (sample perturbation: pair r's copy of a client with one sample replaced,
trajectory B's only) is evaluated for that model alone, on its own data: evaluating every model on every
pair's copy made an evaluation grow as pairs², e.g. 23% of a 256-pair Synthetic run's time for two
evaluations.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

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
        member = torch.zeros(R * 2, data.num_rows + 1, dtype=data.dtype, device=dev)  # last column: absent (-1)
        member[torch.arange(R * 2)[:, None], torch.as_tensor(nb.cmap.reshape(R * 2, M))] = 1.0
        member = member[:, :-1]
        pop = member.sum(1, keepdim=True)  # [2R, 1] each model's population: M, or M - 1 (remove-client)
        self.row_w = member / (pop * sizes)  # [2R, rows]: each model's weight of one sample of each row
        self.member, self.pop = member, pop
        self.own = _own_rows(self.row_w, data.num_task_clients, owner, self.train)
        self.origin = torch.as_tensor(data.origin, device=dev)
        self.unseen = torch.as_tensor(nb.unseen_pool, device=dev)
        self.threads = None  # intra-op threads of large ops (None: torch's), set by the run
        evaluated = R * 2 * len(owner) if self.own is None else \
            R * 2 * len(self.own.shared[2]) + self.own.mask.numel()
        self.flops = model.flops_per_sample(data.x[:1], data.y[:1]) * evaluated

    @functools.cached_property
    def train_w(self) -> torch.Tensor:
        """``[2R, N]`` weights of every model on every evaluated training sample (built on first use: under
        sample perturbation it is pairs² large, and the evaluation itself needs only :attr:`row_w`)."""
        return self.row_w[:, self.train[2]]

    def population_weights(self, q: int) -> torch.Tensor:
        """Weights ``[N]`` over *all* flat training samples (not the evaluation subset) with which
        sum_n w_n loss_n = f(x) = (1/M) sum_i F_i(x) for model q (pair q // 2, trajectory q % 2)."""
        data = self.data
        return (self.member[q] / (self.pop[q] * data.n.to(data.dtype)))[data.flat_owner]

    def evaluate(self, x: torch.Tensor, rows: np.ndarray | None) -> dict:
        """Metrics ``name -> [R, 2]`` numpy arrays; ``rows [R, 2, s]`` are the last round's clients."""
        with threads_for(self.flops, self.threads):
            return self._evaluate(x, rows)

    @torch.no_grad()
    def _evaluate(self, x: torch.Tensor, rows: np.ndarray | None) -> dict:
        R, _, d = x.shape
        m, data = self.model, self.data
        theta = x.reshape(R * 2, d)
        own = self.own
        train_x, train_y, owner = own.shared if own else self.train
        weights = self.row_w[:, owner] if own else self.train_w
        with torch.enable_grad():
            g, losses, correct = m.evaluate(theta, train_x, train_y, weights)
        loss_sum, correct_sum = (losses * weights).sum(1), (correct * weights).sum(1)
        row_loss = _segment_mean(losses, owner, data.num_rows)
        row_acc = _segment_mean(correct, owner, data.num_rows)
        if own:
            with torch.enable_grad():
                g_own, own_losses, own_correct = m.evaluate_own(theta[own.models], own.x, own.y, own.w)
            g = g.index_add(0, own.models, g_own)
            loss_sum = loss_sum.index_add(0, own.models, (own_losses * own.w).sum(1))
            correct_sum = correct_sum.index_add(0, own.models, (own_correct * own.w).sum(1))
            row_loss[own.models, own.rows] = (own_losses * own.mask).sum(1) / own.count
            row_acc[own.models, own.rows] = (own_correct * own.mask).sum(1) / own.count
        out = {"train_loss": loss_sum, "train_acc": correct_sum, "grad_norm_sq": g.pow(2).sum(1)}
        test_losses, test_correct = m.losses(theta, *self.test)
        out["test_loss"], out["test_acc"] = test_losses.mean(1), test_correct.mean(1)
        out["gap"] = out["test_loss"] - out["train_loss"]
        out["r_u"] = row_loss[:, self.unseen].mean(1)
        if rows is not None:
            rows_t = torch.as_tensor(rows.reshape(R * 2, -1), device=x.device)
            out["part_loss"] = row_loss.gather(1, rows_t).mean(1)
            out["part_acc"] = row_acc.gather(1, rows_t).mean(1)
            val_x, val_y, val_owner = self.val
            val_losses, val_correct = m.losses(theta, val_x, val_y)
            val_loss = _segment_mean(val_losses, val_owner, data.num_task_clients)
            trained = val_owner < data.num_train_clients
            out["val_loss"], out["val_acc"] = val_losses[:, trained].mean(1), val_correct[:, trained].mean(1)
            out["r_e"] = val_loss.gather(1, self.origin[rows_t]).mean(1)
            out["client_gap"] = out["r_u"] - out["r_e"]
        return {k: v.reshape(R, 2).cpu().numpy() for k, v in out.items()}


@dataclass
class OwnRows:
    """The training data split for :meth:`Evaluator.evaluate`: ``shared`` (x, y, owner) for every model, and
    per model ``models [Q_o]`` the samples of its own row ``rows [Q_o]``: x ``[Q_o, n, ...]``, y, weights ``w``
    and ``mask [Q_o, n]`` (padding 0), ``count [Q_o]``."""

    shared: tuple
    models: torch.Tensor
    rows: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor
    mask: torch.Tensor
    count: torch.Tensor


def _own_rows(row_w: torch.Tensor, first: int, owner: torch.Tensor, train: tuple):
    """The split of the training data into rows every model may weigh (the task's clients, rows < ``first``)
    and rows beyond them that each belong to exactly one model, one row per model; None where there are no
    such rows (client perturbation, null pairs) or they do not split that way (then every model is
    evaluated on all the data)."""
    extra = torch.arange(first, row_w.shape[1], device=row_w.device)
    if len(extra) == 0:
        return None
    users = row_w[:, extra] != 0  # [Q, extra rows]
    if not bool((users.sum(0) == 1).all()) or bool((users.sum(1) > 1).any()):
        return None
    models = users.float().argmax(0)  # the one model of each extra row
    at = owner >= first
    own = at.nonzero().flatten()  # samples of the extra rows, grouped by row (stable: in data order)
    group = owner[own] - first
    order = torch.argsort(group, stable=True)
    own, group = own[order], group[order]
    count = torch.bincount(group, minlength=len(extra))
    if int(count.min()) == 0:
        return None
    n, start = int(count.max()), torch.cumsum(count, 0) - count
    idx = own[start][:, None].repeat(1, n)  # [Q_o, n], padded with each row's first sample
    idx[group, torch.arange(len(own), device=own.device) - start[group]] = own
    mask = (torch.arange(n, device=row_w.device)[None, :] < count[:, None]).to(row_w.dtype)
    w = row_w[models, extra][:, None] * mask
    shared = (~at).nonzero().flatten()
    x, y = train[0], train[1]
    return OwnRows((x[shared], y[shared], owner[shared]), models, extra, x[idx], y[idx], w, mask,
                   count.to(row_w.dtype))
