"""A tiny float64 problem to pin an algorithm's update rule against a hand computation.

Two training clients hold two samples each of a least-squares problem ``F_i(x) = (1/2n) ||A_i x - b_i||^2``
in two dimensions (plus two held-out clients a run needs). :func:`tiny_run` runs any algorithm on it in
float64, full batch, from ``x_0 = 0``, with ``K`` local steps of client lr ``LR`` and both clients in
every round, so one or two rounds can be recomputed in plain numpy with :func:`grad` and
:func:`reference_rounds` and compared to ``atol=1e-12``::

    from stabkit.testing import LR, grad, reference_rounds, run_rounds, tiny_run

    def test_fedavg_two_rounds():
        x, _ = reference_rounds(2, lambda i, y, x, t: y - LR * grad(i, y),
                                lambda x, ys, state, t: (np.mean(ys, axis=0), state))
        np.testing.assert_allclose(run_rounds(tiny_run("fedavg"), 2), x, rtol=0, atol=1e-12)
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from stabkit import plugins
from stabkit.config.runconfig import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.run.experiment import PairedRun
from stabkit.tasks.base import Task

LR, K = 0.1, 2  # client lr and local steps of every tiny run

# Two training clients with two samples each (rows of A, targets b), plus two held-out clients.
A = [np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[2.0, 0.0], [1.0, 1.0]])]
B = [np.array([1.0, -1.0]), np.array([0.0, 2.0])]


def tiny_task(a=A, b=B) -> Task:
    """Least squares F_i(x) = (1/2n) ||A_i x - b_i||^2 on the training clients (a, b) + 2 held-out clients."""
    xs = list(a) + [np.array([[1.0, 1.0], [1.0, -1.0]]), np.array([[0.5, 0.0], [0.0, 0.5]])]
    ys = list(b) + [np.array([1.0, 0.0]), np.array([0.0, 1.0])]
    return Task(name="tiny", kind="regression", num_classes=0, input_shape=(2,), train_x=xs, train_y=ys,
                val_x=[x[:1] for x in xs], val_y=[y[:1] for y in ys], test_x=xs[0], test_y=ys[0],
                num_train_clients=len(a), default_model="linear")


def tiny_run(algo, hp=None, rounds=1, a=A, b=B, **kw) -> PairedRun:
    """A float64 full-batch paired run on the tiny task starting from x_0 = 0, two clients per round (both
    training clients by default; pass three clients in ``a``, ``b`` to have one sit out rounds).

    ``algo``: an ``--algo`` name, an import path, or an Algorithm subclass defined at module level;
    ``kw``: further :class:`RunConfig` fields (``weight_decay``, ``global_lr``, ...)."""
    if isinstance(algo, type):
        algo = plugins.import_path_of(algo)
    cfg = RunConfig(algo=algo, hp=hp or {}, rounds=rounds, pairs=1, local_steps=K, batch_size="full", lr=LR,
                    clients_per_round=2, perturb="none", init="zeros", dtype="float64",
                    task_options=TaskOptions(clients=len(a), heldout_clients=2), **kw)
    return PairedRun(cfg, task=tiny_task(a, b))


def grad(i: int, x: np.ndarray, a=A, b=B) -> np.ndarray:
    """Full-batch gradient of client i's least-squares loss: A_i^T (A_i x - b_i) / n_i."""
    return a[i].T @ (a[i] @ x - b[i]) / len(b[i])


def local_models(step: Callable, start, clients=(0, 1), k: int = K) -> list:
    """Hand computation of one round's local training: client i starts at ``start`` and applies
    ``y <- step(i, y)`` ``k`` times; returns the clients' final local models."""
    out = []
    for i in clients:
        y = np.array(start, dtype=float, copy=True)
        for _ in range(k):
            y = step(i, y)
        out.append(y)
    return out


def reference_rounds(rounds: int, local_step: Callable, server_step: Callable, state: Optional[dict] = None,
                     x0=None, clients=(0, 1), k: int = K) -> tuple:
    """A hand-written FL loop in plain numpy: ``rounds`` rounds of ``k`` local steps on the tiny problem.

    In round t every client i of ``clients`` starts at x_t and applies ``y <- local_step(i, y, x_t, t)``
    ``k`` times; then ``x_{t+1}, state = server_step(x_t, ys, state, t)`` with ``ys`` the clients' final
    local models. Returns ``(x_rounds, state)`` (``state`` is whatever the server step keeps, e.g. moments).
    """
    x = np.zeros(2) if x0 is None else np.asarray(x0, dtype=float)
    state = {} if state is None else state
    for t in range(rounds):
        ys = local_models(lambda i, y, x=x, t=t: local_step(i, y, x, t), x, clients, k)
        x, state = server_step(x, ys, state, t)
    return x, state


def run_rounds(run: PairedRun, rounds: int) -> np.ndarray:
    """Run ``rounds`` rounds of a tiny run; trajectory A's global model of pair 0."""
    for t in range(rounds):
        run.step()
    return run.engine.x[0, 0].numpy()
