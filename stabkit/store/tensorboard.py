"""A run's per-round scalars as TensorBoard event files (``--tensorboard DIR``; the ``tensorboard`` extra).

From the run's ``metrics.csv`` (so the events hold exactly its numbers, as float32), one step per logged
round:

* ``D_t/mean`` (mean over pairs of ``||x_t - x'_t||``) and ``D_t/pair_<r>`` per pair;
* ``<metric>/a`` and ``<metric>/b`` (mean over pairs) for the train and test loss and accuracy, the gap
  (test - train loss) and ``R_u-R_e`` (the unparticipating-client gap, ``client_gap`` in the CSV), at the
  rounds where they were evaluated.

The folder is written beside its final place and moved there whole, so TensorBoard never reads half a run;
the events are written in this thread (TensorBoard's record format, no writer thread whose failure would
print its own traceback), and a file system that refuses the write (full, read-only) is one line naming the
folder, with the temporary one removed. :func:`check_logdir` checks the folder before a run starts.
"""
from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path

import numpy as np

from stabkit.errors import ConfigError
from stabkit.extras import require_extra
from stabkit.trajectories import TRAJ

METRICS = {"train_loss": "train_loss", "test_loss": "test_loss", "train_acc": "train_acc", "test_acc": "test_acc",
           "gap": "gap", "client_gap": "R_u-R_e"}  # metrics.csv column (without _a/_b) -> tag


def require_tensorboard() -> None:
    """One line naming the install command when the extra is missing (checked before a run starts)."""
    require_extra("tensorboard")


def check_logdir(logdir, *names) -> None:
    """Before a run: the extra is installed, and ``logdir`` and its run folders ``logdir/NAME`` can be written
    as directories (not a file, a dangling link, a read-only place or a name too long)."""
    from stabkit.store.outdir import check_writable

    require_tensorboard()
    check_writable(logdir, "tensorboard")
    for name in names:
        check_writable(Path(logdir) / name, "tensorboard")


class TensorBoardEvents:
    """The round loop's callback (``stabkit.run.loop``) writing the events of the run in ``run_dir`` to
    ``logdir`` when it ends (finished, diverged, interrupted or failed: what was logged), after its summary;
    ``written``: the folder, once written."""

    def __init__(self, run_dir, logdir):
        self.run_dir, self.logdir, self.written = Path(run_dir), Path(logdir), None

    def on_run_end(self, run, state) -> None:
        self.written = write_events(self.run_dir, self.logdir)


def scalars(df) -> dict:
    """``tag -> [(round, value), ...]`` of a run's metrics (a ``load_run`` frame)."""
    out = {"D_t/mean": list(df.groupby("round")["disc"].mean().items())}
    for pair, g in df.groupby("pair"):
        out[f"D_t/pair_{int(pair)}"] = list(zip(g["round"], g["disc"]))
    for col, tag in METRICS.items():
        for traj in TRAJ:
            if f"{col}_{traj}" in df:
                means = df.groupby("round")[f"{col}_{traj}"].mean()
                out[f"{tag}/{traj}"] = [(t, v) for t, v in means.items() if np.isfinite(v)]
    return out


def write_events(run_dir, logdir) -> Path:
    """Write the scalars of the run in ``run_dir`` to the TensorBoard folder ``logdir`` (replaced whole)."""
    from stabkit.store.runstore import load_run

    require_tensorboard()
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    logdir = Path(logdir)
    tmp = logdir.with_name(f".{logdir.name}.tmp-{os.getpid()}")
    points = scalars(load_run(run_dir))
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        now = time.time()
        with open(tmp / f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}.0", "wb") as f:
            writer = RecordWriter(f)
            writer.write(Event(wall_time=now, file_version="brain.Event:2").SerializeToString())
            for tag, values in points.items():
                for step, value in values:
                    summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
                    writer.write(Event(wall_time=now, step=int(step), summary=summary).SerializeToString())
            f.flush()
            os.fsync(f.fileno())
        shutil.rmtree(logdir, ignore_errors=True)
        os.replace(tmp, logdir)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConfigError(f"invalid tensorboard={str(logdir)!r}: writing the events failed ({e.strerror or e}); "
                          f"the run itself is kept in {run_dir}") from None
    return logdir
