"""Run directories: ``config.json``, ``metrics.csv``, ``local.csv``, ``summary.json``, ``constants.json``,
``checkpoint.pt`` and ``models/``, written atomically.

Every file is written to a temporary sibling and moved into place with ``os.replace``, so a reader (or
an interrupted run) never sees a half-written file; the metric logs grow by appended row groups that
readers see whole (``stabkit.run.metricslog``). A directory that holds a run is never silently
overwritten. ``load_run`` returns the per-round metrics as a pandas DataFrame with the run's config and
summary in ``df.attrs``.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from stabkit.errors import ConfigError


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def atomic_write_csv(path: Path, df: pd.DataFrame) -> None:
    atomic_write_text(path, df.to_csv(index=False, float_format="%.10g"))


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


RUN_FILES = ("config.json", "metrics.csv", "local.csv", "summary.json", "constants.json", "checkpoint.pt")


def existing_run(path) -> str | None:
    """A short description of the run ``path`` already holds (None if it holds none)."""
    path = Path(path)
    if not any((path / f).is_file() for f in RUN_FILES) and not (path / "models").is_dir():
        return None
    summary = path / "summary.json"
    if summary.is_file():
        s = json.loads(summary.read_text())
        what = f"{s.get('status', 'unknown')} after {s.get('rounds_done', '?')} rounds"
    else:
        what = "unfinished or killed"
    return what + (", with a checkpoint" if (path / "checkpoint.pt").is_file() else ", no checkpoint")


def prepare_run_dir(path, overwrite: bool = False) -> Path:
    """Create ``path`` (and parents) or fail with a one-line error if it cannot be written. A directory that
    already holds a run is an error naming how to resume or replace it; ``overwrite`` removes that run's
    files (and only those) instead."""
    path = Path(path)
    check_new_run_dir(path, overwrite)
    if overwrite:
        for f in RUN_FILES:
            (path / f).unlink(missing_ok=True)
        shutil.rmtree(path / "models", ignore_errors=True)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".probe", delete=True)
        probe.close()
    except OSError as e:
        raise ConfigError(f"invalid out={str(path)!r}: the output directory must be writable ({e.strerror})") from None
    return path


def check_new_run_dir(path, overwrite: bool = False) -> None:
    """ConfigError if ``path`` holds a run and ``overwrite`` is not set (nothing is written)."""
    what = None if overwrite else existing_run(path)
    if what:
        raise ConfigError(f"invalid out={str(path)!r}: it already holds a run ({what}); continue it with "
                          f"`stabkit pair --resume {path}` (--rounds N to extend it) or replace it with --overwrite")


def load_run(path) -> pd.DataFrame:
    """Per-round metrics of a run (one row per round x pair); ``attrs['config']``, ``attrs['summary']``."""
    path = Path(path)
    metrics = path / "metrics.csv"
    if not metrics.is_file():
        raise ConfigError(f"invalid run={str(path)!r}: expected a run directory containing metrics.csv")
    from stabkit.run.metricslog import read_complete  # metricslog writes through this module
    attrs = {name: json.loads((path / f"{name}.json").read_text()) for name in ("config", "summary")
             if (path / f"{name}.json").is_file()}
    df = read_complete(metrics, attrs.get("config", {}).get("pairs"))
    df.attrs.update(attrs)
    return df


def load_local(path) -> pd.DataFrame:
    """Local-discrepancy rows (round, pair, k, l1_a, l1_b, l2, l3) of a run."""
    from stabkit.run.metricslog import read_complete
    return read_complete(Path(path) / "local.csv")
