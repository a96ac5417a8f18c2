"""A run's per-round scalars as TensorBoard event files (``--tensorboard DIR``; the ``tensorboard`` extra).

From the run's ``metrics.csv`` (so the events hold exactly its numbers, as float32), one step per logged
round:

* ``D_t/mean`` (mean over pairs of ``||x_t - x'_t||``) and ``D_t/pair_<r>`` per pair;
* ``<metric>/a`` and ``<metric>/b`` (mean over pairs) for the train and test loss and accuracy, the gap
  (test - train loss) and ``R_u-R_e`` (the unparticipating-client gap, ``client_gap`` in the CSV), at the
  rounds where they were evaluated.

The folder is written beside its final place and moved there whole, so TensorBoard never reads half a run.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from stabkit.extras import require_extra

METRICS = {"train_loss": "train_loss", "test_loss": "test_loss", "train_acc": "train_acc", "test_acc": "test_acc",
           "gap": "gap", "client_gap": "R_u-R_e"}  # metrics.csv column (without _a/_b) -> tag


def require_tensorboard() -> None:
    """One line naming the install command when the extra is missing (checked before a run starts)."""
    require_extra("tensorboard")


def scalars(df) -> dict:
    """``tag -> [(round, value), ...]`` of a run's metrics (a ``load_run`` frame)."""
    out = {"D_t/mean": list(df.groupby("round")["disc"].mean().items())}
    for pair, g in df.groupby("pair"):
        out[f"D_t/pair_{int(pair)}"] = list(zip(g["round"], g["disc"]))
    for col, tag in METRICS.items():
        for traj in ("a", "b"):
            if f"{col}_{traj}" in df:
                means = df.groupby("round")[f"{col}_{traj}"].mean()
                out[f"{tag}/{traj}"] = [(t, v) for t, v in means.items() if np.isfinite(v)]
    return out


def write_events(run_dir, logdir) -> Path:
    """Write the scalars of the run in ``run_dir`` to the TensorBoard folder ``logdir`` (replaced whole)."""
    from stabkit.store.runstore import load_run

    require_tensorboard()
    from torch.utils.tensorboard import SummaryWriter

    logdir = Path(logdir)
    tmp = logdir.with_name(f".{logdir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    writer = SummaryWriter(log_dir=str(tmp))
    try:
        for tag, points in scalars(load_run(run_dir)).items():
            for step, value in points:
                writer.add_scalar(tag, float(value), global_step=int(step))
    finally:
        writer.close()
    shutil.rmtree(logdir, ignore_errors=True)
    os.replace(tmp, logdir)
    return logdir
