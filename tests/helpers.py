"""Small shared fixtures: a hand-sized regression task, run helpers and an in-process CLI runner."""
import numpy as np
import pandas as pd

from stabkit import RunConfig, TaskOptions
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


def tiny_run(algo: str, hp=None, rounds=1, a=A, b=B, **kw) -> PairedRun:
    """A float64 full-batch paired run on the tiny task starting from x_0 = 0, two clients per round (both
    training clients by default; pass three clients in ``a``, ``b`` to have one sit out rounds)."""
    cfg = RunConfig(algo=algo, hp=hp or {}, rounds=rounds, pairs=1, local_steps=K, batch_size="full", lr=LR,
                    clients_per_round=2, perturb="none", init="zeros", dtype="float64",
                    task_options=TaskOptions(clients=len(a), heldout_clients=2), **kw)
    return PairedRun(cfg, task=tiny_task(a, b))


def grad(i: int, x: np.ndarray) -> np.ndarray:
    """Full-batch gradient of client i's least-squares loss: A_i^T (A_i x - b_i) / n_i."""
    return A[i].T @ (A[i] @ x - B[i]) / len(B[i])


def local_models(step, start, clients=(0, 1)) -> list:
    """Hand computation of one round's local training: client i starts at ``start`` and applies
    ``y <- step(i, y)`` K times; returns the clients' final local models."""
    out = []
    for i in clients:
        y = np.array(start, dtype=float, copy=True)
        for _ in range(K):
            y = step(i, y)
        out.append(y)
    return out


def run_rounds(run: PairedRun, rounds: int) -> np.ndarray:
    """Run ``rounds`` rounds of a tiny run; trajectory A's global model of pair 0."""
    for t in range(rounds):
        run.engine.step(t)
    return run.engine.x[0, 0].numpy()


def metrics(run: PairedRun) -> pd.DataFrame:
    return pd.concat(run.rows, ignore_index=True)


def cli(args, capsys):
    """Run ``stabkit ARGS`` in-process: ``(exit code, stdout, stderr)``, code 0 when click returns normally."""
    from stabkit_cli.main import main
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err
