"""Task: a federated data set (per-client arrays), a test split, held-out clients and a model.

A task is built once from plain numpy arrays and is shared by both trajectories of every pair; the
engine (``stabkit.engine.data``) turns it into one flat store with per-client offsets. Client lists hold
the ``num_train_clients`` training clients first, then the held-out clients (never in the training
population: they supply the replacement clients of client perturbation and the unparticipating-client risk
R_u).

``Task`` is public API: users build one from their own arrays and pass it to ``PairedRun(cfg, task=...)``
/ ``run_pair(..., task=...)``, or install a builder ``build(opts: TaskOptions) -> Task`` as a plug-in
(``--task package.module:build`` or the entry-point group ``stabkit.tasks``). :func:`check_task` checks
one before any run uses it, so a malformed task is one line naming what is wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stabkit.errors import require


@dataclass
class Task:
    """Federated data, already partitioned.

    ``name``: recorded in the run's ``config.json``. ``kind``: ``"classification"`` (cross-entropy on
    ``num_classes`` logits) or ``"regression"`` (squared error on one output; ``num_classes = 0``).
    ``input_shape``: one sample's shape, e.g. ``(1, 28, 28)``.
    ``train_x[i]`` / ``train_y[i]``: client i's training samples (``[n_i, *input_shape]`` float, or int64
    token ids; labels ``[n_i]`` int64 in ``[0, num_classes)`` for classification, float for regression),
    for the ``num_train_clients`` training clients first and then at least 2 held-out clients.
    ``val_x[i]`` / ``val_y[i]``: at least one held-out sample from client i's own distribution (semi-empirical
    risk R_e, and the pool a replaced sample is drawn from). ``test_x`` / ``test_y``: the test split.
    ``default_model``: the model used when the run names none (a ``--model`` name or import path).
    ``constants``: closed-form problem constants where the task knows them, for its default model (quadratic:
    L, mu, sigma_g2, sigma_g2_mean, convex, x_star, f_star; a run's constants.json takes them in place of the
    estimates, ``stabkit.run.constants.with_exact``). ``description``: one line for listings.
    """

    name: str
    kind: str  # "classification" or "regression"
    num_classes: int  # 0 for regression
    input_shape: tuple
    train_x: list
    train_y: list
    val_x: list
    val_y: list
    test_x: np.ndarray
    test_y: np.ndarray
    num_train_clients: int
    default_model: str
    constants: dict = field(default_factory=dict)
    description: str = ""

    @property
    def num_clients(self) -> int:
        """Training clients plus held-out clients."""
        return len(self.train_x)

    @property
    def num_heldout_clients(self) -> int:
        return self.num_clients - self.num_train_clients


def check_task(task, label: str) -> None:
    """Raise a one-line ConfigError naming ``label`` (e.g. ``task='mytask'``) unless ``task`` is a usable
    :class:`Task`: consistent client lists, >= 1 training and validation sample per client, >= 2 held-out
    clients, sample shapes equal to ``input_shape`` and labels that fit ``kind`` / ``num_classes``."""
    def need(ok, what):
        require(ok, "task", label, what)

    need(isinstance(task, Task), f"a stabkit.tasks.Task, but got {type(task).__name__}")
    need(task.kind in ("classification", "regression"), f"kind must be classification or regression, not {task.kind!r}")
    n = len(task.train_x)
    need(len(task.train_y) == n and len(task.val_x) == n and len(task.val_y) == n,
         f"train_x, train_y, val_x and val_y must list the same clients (lengths {len(task.train_x)}, "
         f"{len(task.train_y)}, {len(task.val_x)}, {len(task.val_y)})")
    need(isinstance(task.num_train_clients, int) and 1 <= task.num_train_clients <= n,
         f"num_train_clients={task.num_train_clients!r} must be in [1, {n}] (the number of clients listed)")
    need(task.num_heldout_clients >= 2, f"needs at least 2 held-out clients after its {task.num_train_clients} "
         f"training clients (they replace clients and estimate the unseen-client risk), it has {task.num_heldout_clients}")
    shape = tuple(task.input_shape)
    parts = [("train", task.train_x, task.train_y), ("val", task.val_x, task.val_y)]
    for split, xs, ys in parts:
        for i, (x, y) in enumerate(zip(xs, ys)):
            x, y = np.asarray(x), np.asarray(y)
            need(len(x) >= 1 and len(x) == len(y), f"{split} client {i} needs >= 1 sample and as many labels "
                 f"as inputs (has {len(x)} inputs, {len(y)} labels)")
            need(tuple(x.shape[1:]) == shape, f"{split} client {i} has samples of shape {tuple(x.shape[1:])}, "
                 f"input_shape is {shape}")
    test_x, test_y = np.asarray(task.test_x), np.asarray(task.test_y)
    need(len(test_x) == len(test_y) and tuple(test_x.shape[1:]) == shape,
         f"test_x must be [n, *input_shape] with one label each (shape {test_x.shape}, {len(test_y)} labels)")
    need(len(test_x) >= 1, "its test set is empty (test_x has 0 samples; the test loss and gap need >= 1)")
    for split, arrays in (("x", [*task.train_x, *task.val_x, test_x]), ("y", [*task.train_y, *task.val_y, test_y])):
        _check_numbers(need, split, arrays)
    if task.kind == "classification":
        need(isinstance(task.num_classes, int) and task.num_classes >= 2, "a classification task needs num_classes >= 2")
        for y in [*task.train_y, *task.val_y, test_y]:
            y = np.asarray(y)
            need(np.issubdtype(y.dtype, np.integer) and (len(y) == 0 or 0 <= y.min() <= y.max() < task.num_classes),
                 f"classification labels must be integers in [0, {task.num_classes})")


def _check_numbers(need, name: str, arrays: list) -> None:
    """Numbers only (integer or floating, as the npz loader requires), every one finite as float32: a NaN
    or inf in the data is refused here with the count, not met later as a run diverging at round 1."""
    bad, dtypes = 0, set()
    for a in arrays:
        a = np.asarray(a)
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
            dtypes.add(str(a.dtype))
        elif np.issubdtype(a.dtype, np.floating):
            with np.errstate(over="ignore"):
                bad += int(a.size - np.count_nonzero(np.isfinite(a.astype(np.float32))))
    need(not dtypes, f"{name} of dtype {sorted(dtypes)[0] if dtypes else ''} (need integer or float numbers)")
    need(not bad, f"{bad} non-finite values in {name} (NaN, inf, or beyond float32's range)")
