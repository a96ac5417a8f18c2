"""A weighted training loss of Q models at once: F_q(theta_q) = sum_n w[q, n] loss_n(theta_q).

One object serves every sharpness measure: ``loss`` (forward only), ``grad`` (the engine's batched
evaluation, the hand-written fast path where the model has one) and ``hvp`` (a double backward through the
model's grouped graph, or forward-over-reverse ``jvp(grad)`` with ``torch.func``, of the sum over models, whose
Hessian is block diagonal, so one call gives every model's Hessian-vector product). Data are processed in memory-bounded chunks and the chunks' results summed.
Weights of a trajectory's training objective are ``Evaluator.train_w`` (client-uniform, all of the data
or a fixed paired subset); a client's local objective puts 1/n_i on its own samples.
"""
from __future__ import annotations

import torch
from torch.func import grad, jvp, vmap

from stabkit.engine.data import FederatedData
from stabkit.engine.evaluation import Evaluator
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.perturbation import Neighbours
from stabkit.errors import require

HVP_MEMORY_FACTOR = 3  # forward-over-reverse keeps tangents of activations and their gradients too


class Objective:
    """Weighted losses of models ``theta [Q, d]`` on shared data ``x [N, ...]``, weights ``w [Q, N]``."""

    def __init__(self, model: FlatModel, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
        self.model, self.x, self.y, self.w = model, x, y, w
        self.Q = w.shape[0]

    @property
    def flops(self) -> float:
        """FLOPs of one gradient of all models (forward + backward), for the thread policy."""
        return self.model.flops_per_sample(self.x[:1], self.y[:1]) * len(self.x) * self.Q

    def select(self, index) -> "Objective":
        """The objective of a subset (or repetition) of the models: weights ``w[index]``."""
        return Objective(self.model, self.x, self.y, self.w[index])

    def repeat(self, times: int) -> "Objective":
        """The same Q objectives for ``times * Q`` models stacked block-wise (``theta.repeat(times, 1)``)."""
        return Objective(self.model, self.x, self.y, self.w.repeat(times, 1))

    @torch.no_grad()
    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """F_q(theta_q) ``[Q]``."""
        losses, _ = self.model.losses(theta, self.x, self.y)
        return (losses * self.w).sum(1)

    def grad(self, theta: torch.Tensor) -> tuple:
        """(gradient ``[Q, d]``, F ``[Q]``) at ``theta``."""
        with torch.enable_grad():
            g, losses, _ = self.model.evaluate(theta, self.x, self.y, self.w)
        return g.detach(), (losses.detach() * self.w).sum(1)

    def hvp(self, theta: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Hessian-vector products ``[Q, d]``: row q is the Hessian of F_q at theta_q times v_q."""
        return self.hvp_many(theta, v[None])[0]

    def hvp_many(self, theta: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        """Hessian-vector products ``[n, Q, d]`` with n vectors per model, ``V [n, Q, d]`` (Hutchinson's probes,
        Lanczos' single vector). A model whose fast path is the grouped form (ResNet-18-GN, plug-in models it
        expresses) takes a double backward through its grouped graph with the n x Q models side by side; the
        others forward-over-reverse ``torch.func`` with the n tangents batched by ``vmap`` over one shared
        primal: the forward and backward at theta run once for all n vectors, not n times (LeNet-5's
        100-probe trace: see docs/performance.md)."""
        n, Q, d = V.shape
        grouped = self.model.grouped()
        if grouped is not None:
            rows = Objective(self.model, self.x, self.y, self.w.repeat(n, 1))  # probe-major: row i*Q + q
            out = torch.zeros(n * Q, d, dtype=theta.dtype, device=theta.device)
            for chunk in self.model._chunks(self.x, n * Q * HVP_MEMORY_FACTOR):
                out += grouped.hvp(theta.repeat(n, 1), V.reshape(n * Q, d), self.x[chunk], self.y[chunk],
                                   rows.w[:, chunk])
            return out.view(n, Q, d)
        return self._forward_over_reverse(theta, V)

    def _forward_over_reverse(self, theta: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
        model = self.model
        per_model = lambda th, xc, yc: model.per_sample_loss(model.forward(th, xc), yc)  # noqa: E731
        out = torch.zeros_like(V)
        for chunk in model._chunks(self.x, len(V) * self.Q * HVP_MEMORY_FACTOR):
            xc, yc, wc = self.x[chunk], self.y[chunk], self.w[:, chunk]
            total = lambda th: (vmap(per_model, in_dims=(0, None, None))(th, xc, yc) * wc).sum()  # noqa: E731
            one = lambda v: jvp(grad(total), (theta,), (v,))[1]  # noqa: E731
            with torch.enable_grad():
                out += (one(V[0])[None] if len(V) == 1 else vmap(one)(V)).detach()
        return out


def training_objective(model: FlatModel, data: FederatedData, nb: Neighbours, seed: int,
                       fraction: float = 1.0) -> Objective:
    """The training objectives f = (1/M) sum_i F_i of both trajectories of every pair of a paired run
    (2R models, pair-major: row 2r + j; ``nb`` its neighbours, ``seed`` its seed), on all data or a fixed
    paired subset (``fraction`` of every client's samples, the subset ``--eval-fraction`` uses)."""
    ev = Evaluator(model, data, nb, fraction, seed)
    x, y, _ = ev.train
    used = (ev.train_w != 0).any(0)  # samples of held-out and unused neighbour clients carry no weight
    return Objective(model, x[used], y[used], ev.train_w[:, used])


def check_fraction(fraction: float, data: FederatedData) -> None:
    """Refuse a ``fraction`` that keeps less than one sample of the smallest client (the fixed subset would
    silently round it up to one sample per client), saying how many samples it is."""
    n_min = int(data.n_np[: data.num_task_clients].min())
    require(fraction * n_min >= 1, "fraction", fraction, f"at least {1 / n_min:.3g}: it keeps {fraction * n_min:.3g} "
            f"of the smallest client's {n_min} training samples, and every client needs at least one")


def client_objective(model: FlatModel, data: FederatedData, rows) -> Objective:
    """Local objectives F_i (mean loss on client row i's own training samples) of ``rows [Q]``."""
    rows_t = torch.as_tensor(rows, device=data.flat_owner.device).reshape(-1)
    keep = torch.isin(data.flat_owner, rows_t)
    owner = data.flat_owner[keep]
    w = (owner[None, :] == rows_t[:, None]).to(data.dtype)
    return Objective(model, data.flat_x[keep], data.flat_y[keep], w / w.sum(1, keepdim=True))
