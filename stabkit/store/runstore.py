"""Run directories as a command meets them: ``--out`` checked, a directory holding a run refused (or replaced
with ``--overwrite``), and ``load_run``/``load_local``, the public readers.

The layout itself, the format version and every reader and writer of a run's files are
:class:`stabkit.store.rundir.RunDir`'s; this module decides only whether a directory may take a new run. A
directory that holds a run is never silently overwritten.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from stabkit.errors import ConfigError
from stabkit.store.outdir import check_writable, prepare_dir
from stabkit.store.rundir import FLOWER_APP, RunDir

if TYPE_CHECKING:  # annotations only: imported on use
    import pandas as pd


def require_out(out) -> None:
    """Refuse an empty ``--out`` (it would silently mean the current directory)."""
    if out is not None and not str(out).strip():
        raise ConfigError(f"invalid out={str(out)!r}: a directory path (or leave --out out for the default)")


def existing_run(path) -> str | None:
    """A short description of the run ``path`` already holds (None if it holds none)."""
    run = RunDir(path)
    if not any(run.file(f).is_file() for f in RunDir.FILES) and not run.file(RunDir.MODELS).is_dir():
        return None
    if run.has(RunDir.SUMMARY):
        try:
            s = run.summary
            what = f"{s.get('status', 'unknown')} after {s.get('rounds_done', '?')} rounds"
        except ConfigError:
            what = f"finished (unreadable {RunDir.SUMMARY})"
    else:
        what = "unfinished or killed"
    return what + (", with a checkpoint" if run.has(RunDir.CHECKPOINT) else ", no checkpoint")


def prepare_run_dir(path, overwrite: bool = False) -> Path:
    """A run directory: ``prepare_dir``, after refusing a directory that already holds a run (the error names
    how to resume or replace it); ``overwrite`` removes that run's files (and only those) instead."""
    path = Path(path)
    check_writable(path)
    check_new_run_dir(path, overwrite)
    if overwrite:  # every file and folder of the layout: nothing of the replaced run stays beside the new one
        run = RunDir(path)
        for f in RunDir.FILES:
            run.file(f).unlink(missing_ok=True)
        for folder in RunDir.FOLDERS:
            shutil.rmtree(run.file(folder), ignore_errors=True)
    return prepare_dir(path)


def check_new_run_dir(path, overwrite: bool = False) -> None:
    """ConfigError if ``path`` holds a run and ``overwrite`` is not set (nothing is written)."""
    what = None if overwrite else existing_run(path)
    if what:
        raise ConfigError(f"invalid out={str(path)!r}: it already holds a run ({what}); continue it with "
                          f"`stabkit pair --resume {path}` (--rounds N to extend it) or replace it with --overwrite")


def is_app_run(path) -> bool:
    """``path`` holds a ``--flwr-app`` run (its config.json says so)."""
    try:
        return RunDir(path).kind == FLOWER_APP
    except ConfigError:
        return False


def load_run(path) -> pd.DataFrame:
    """Per-round metrics of a run (one row per round x pair); ``attrs['config']``, ``attrs['summary']``
    (:meth:`RunDir.metrics`)."""
    return RunDir(path).metrics()


def load_local(path) -> pd.DataFrame:
    """Local-discrepancy rows (round, pair, k, l1_a, l1_b, l2, l3) of a run (:meth:`RunDir.local`)."""
    local = RunDir(path).local()
    if local is None:
        raise ConfigError(f"invalid run={str(path)!r}: it logged no local discrepancies (run with --local-rounds)")
    return local
