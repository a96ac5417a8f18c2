"""Run directories: ``config.json``, ``metrics.csv``, ``local.csv``, ``summary.json``, ``constants.json``,
``checkpoint.pt`` and ``models/``, written atomically.

Every file is written to a temporary sibling and moved into place with ``os.replace``, so a reader (or
an interrupted run) never sees a half-written file; the metric logs grow by appended row groups that
readers see whole (``stabkit.run.metricslog``). A directory that holds a run is never silently
overwritten. ``load_run`` returns the per-round metrics as a pandas DataFrame with the run's config and
summary in ``df.attrs``.
"""
from __future__ import annotations

import contextlib
import errno
import io
import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import pandas as pd

from stabkit.errors import ConfigError, DiskFull
from stabkit.run.filemode import shared_tempfile


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling and move it over ``path`` (the file gets the umask's mode, not
    mkstemp's 0600); a full disk raises ``DiskFull``."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = shared_tempfile(path)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise_if_disk_full(e, path, len(text.encode()))
        raise


def raise_if_disk_full(e: BaseException, path: Path, nbytes: int) -> None:
    """Turn a full-disk ``OSError`` while writing ``nbytes`` to ``path`` into the one-line ``DiskFull``."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        free = shutil.disk_usage(path.parent).free if path.parent.is_dir() else 0
        raise DiskFull(f"cannot write {str(path)!r}: no space left on the device ({nbytes} bytes "
                       f"needed, {free} free); the files written before are intact") from None


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_text(path, strict_json(obj, indent=2, sort_keys=True) + "\n")


def strict_json(obj, **kw) -> str:
    """JSON that strict parsers (``JSON.parse``, ``jq``) accept: NaN and ±Infinity are written as ``null``."""
    return json.dumps(_finite(obj), allow_nan=False, default=_json_default, **kw)


def _finite(o):
    if isinstance(o, float) or hasattr(o, "dtype") and getattr(o, "ndim", 1) == 0:
        v = o.item() if hasattr(o, "item") else o
        return None if isinstance(v, float) and not math.isfinite(v) else v
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if hasattr(o, "tolist"):
        return _finite(o.tolist())
    return o


def atomic_write_csv(path: Path, df: pd.DataFrame) -> None:
    atomic_write_text(path, df.to_csv(index=False, float_format="%.10g"))


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def require_out(out) -> None:
    """Refuse an empty ``--out`` (it would silently mean the current directory)."""
    if out is not None and not str(out).strip():
        raise ConfigError(f"invalid out={str(out)!r}: a directory path (or leave --out out for the default)")


RUN_FILES = ("config.json", "metrics.csv", "local.csv", "summary.json", "constants.json", "checkpoint.pt")


def existing_run(path) -> str | None:
    """A short description of the run ``path`` already holds (None if it holds none)."""
    path = Path(path)
    if not any((path / f).is_file() for f in RUN_FILES) and not (path / "models").is_dir():
        return None
    summary = path / "summary.json"
    if summary.is_file():
        try:
            s = json.loads(summary.read_text())
            what = f"{s.get('status', 'unknown')} after {s.get('rounds_done', '?')} rounds"
        except (ValueError, AttributeError):
            what = "finished (unreadable summary.json)"
    else:
        what = "unfinished or killed"
    return what + (", with a checkpoint" if (path / "checkpoint.pt").is_file() else ", no checkpoint")


def prepare_run_dir(path, overwrite: bool = False) -> Path:
    """A run directory: ``prepare_dir``, after refusing a directory that already holds a run (the error names
    how to resume or replace it); ``overwrite`` removes that run's files (and only those) instead."""
    path = Path(path)
    check_new_run_dir(path, overwrite)
    if overwrite:
        for f in RUN_FILES:
            (path / f).unlink(missing_ok=True)
        shutil.rmtree(path / "models", ignore_errors=True)
    return prepare_dir(path)


def prepare_dir(path) -> Path:
    """Create ``path`` (and parents) or fail with a one-line error if it cannot be written."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".probe", delete=True)
        probe.close()
    except OSError as e:
        raise ConfigError(f"invalid out={str(path)!r}: the output directory must be writable ({e.strerror})") from None
    return path


@contextlib.contextmanager
def output_dir(path):
    """:func:`prepare_dir` for a command's output, undone on failure: when the command then refuses or
    fails, the directories this created are removed again while empty (a refusal leaves nothing behind)."""
    path = Path(path)
    created = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
    prepare_dir(path)
    try:
        yield path
    except BaseException:
        for p in created:
            try:
                p.rmdir()
            except OSError:  # not empty (something was written) or gone: keep it and everything above
                break
        raise


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
    text = metrics.read_text()
    if not text.strip():
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv is empty (the run wrote no round; rerun it)")
    if not text.endswith("\n") and (path / "summary.json").is_file():  # a finished run's log ends with its last row
        line = text.count("\n") + 1
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv is cut off in line {line} (an interrupted copy "
                          f"or a full disk?); delete that line to analyse the rounds before it")
    attrs = {name: read_json(path / f"{name}.json", name) for name in ("config", "summary")
             if (path / f"{name}.json").is_file()}
    from stabkit.run.metricslog import read_complete  # metricslog writes through this module
    try:  # a run being written: only its whole row groups
        df = read_complete(metrics, attrs.get("config", {}).get("pairs"))
    except (ValueError, pd.errors.ParserError) as e:
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv is not a metrics table ({_first_line(e)})") from None
    if not {"round", "pair", "disc"} <= set(df.columns):
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv lacks the columns round, pair, disc")
    df.attrs.update(attrs)
    return df


def read_json(path: Path, what: str):
    """The object in the JSON file ``path``; a corrupted file raises a one-line ``ConfigError`` naming it."""
    try:
        obj = json.loads(Path(path).read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"invalid {what} file {str(path)!r}: not valid JSON ({_first_line(e)}); restore it or "
                          f"rerun the run that wrote it") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"invalid {what} file {str(path)!r}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def load_local(path) -> pd.DataFrame:
    """Local-discrepancy rows (round, pair, k, l1_a, l1_b, l2, l3) of a run."""
    from stabkit.run.metricslog import read_complete
    return read_complete(Path(path) / "local.csv")
