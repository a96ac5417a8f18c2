"""``--tensorboard DIR`` for sweeps and atlases: every job's scalars in its own run folder,
``DIR/<sweep directory name>/<job id>`` (``stabkit.store.tensorboard``), written as each job finishes and,
on a resumed sweep, for the jobs finished before that have no folder yet."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

from stabkit.store.rundir import RunDir
from stabkit.store.tensorboard import check_logdir, write_events


class TensorBoardHook:
    """A sweep progress callback (``run_sweep(..., progress=)``) that writes the events, then calls ``inner``."""

    def __init__(self, logdir, inner: Optional[Callable] = None):
        self.logdir, self.inner = Path(logdir), inner

    def folder(self, manifest, job_id: str) -> Path:
        return self.logdir / Path(manifest.root).name / job_id

    def __call__(self, event, job_id, manifest, info):
        if self.inner is not None:
            self.inner(event, job_id, manifest, info)
        if event == "start":
            ids = [j for j, rec in manifest.jobs.items() if rec["state"] == "done"
                   and not self.folder(manifest, j).is_dir()]
        else:
            ids = [job_id] if event == "finished" else []
        for j in ids:
            run = manifest.job_dir(j)
            if RunDir(run).has(RunDir.METRICS):
                self.folder(manifest, j).parent.mkdir(parents=True, exist_ok=True)
                write_events(run, self.folder(manifest, j))


def with_tensorboard(progress: Optional[Callable], logdir, *names) -> Optional[Callable]:
    """``progress`` wrapped in a :class:`TensorBoardHook` writing to ``logdir`` (None: unchanged); a missing
    extra, or a ``logdir`` (or ``logdir/NAME`` of the sweep folders ``names``) that cannot be written, is one line
    here, before anything runs."""
    if logdir is None:
        return progress
    check_logdir(logdir, *names)
    return TensorBoardHook(logdir, progress)
