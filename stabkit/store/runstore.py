"""Run directories: ``config.json``, ``metrics.csv``, ``local.csv``, ``summary.json``, ``constants.json``,
``checkpoint.pt`` and ``models/``, written atomically.

Every file is written to a temporary sibling and moved into place with ``os.replace``, so a reader (or
an interrupted run) never sees a half-written file; the metric logs grow by appended row groups that
readers see whole (``stabkit.store.metricslog``); the atomic writers are ``stabkit.store.atomic``. A directory that holds a run is never silently
overwritten. ``load_run`` returns the per-round metrics as a pandas DataFrame with the run's config and
summary in ``df.attrs``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from stabkit.errors import ConfigError
from stabkit.store.mapping import read_mapping
from stabkit.store.outdir import check_writable, prepare_dir

if TYPE_CHECKING:  # annotations only: imported on use
    import pandas as pd


FIGURES_DIR = "figures"  # RUN/figures: what `stabkit bounds RUN --plot` and `stabkit privacy RUN --plot` draw

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
    check_writable(path)
    check_new_run_dir(path, overwrite)
    if overwrite:
        for f in RUN_FILES:
            (path / f).unlink(missing_ok=True)
        shutil.rmtree(path / "models", ignore_errors=True)
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
        return "flwr_app" in json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return False


class Recorded(dict):
    """A run file's record (config, summary) as ``load_run`` puts it in ``df.attrs``: read-only, and shared by
    every frame derived from it. pandas deep-copies ``attrs`` on every operation, which was two thirds of the
    time of analysing a run for the atlas; a record is never changed, so copies may share it (``dict(record)``
    gives a changeable copy)."""

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):  # pickled (a job read in a worker process) as its contents, not item by item
        return Recorded, (dict(self),)

    def _read_only(self, *args, **kwargs):
        raise TypeError("a run's recorded config or summary is read-only; change dict(record) instead")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only


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
    attrs = {name: Recorded(read_json(path / f"{name}.json", name)) for name in ("config", "summary")
             if (path / f"{name}.json").is_file()}
    import pandas as pd  # on use: `stabkit pair` checks its --out before pandas (~1 s) is imported

    from stabkit.store.metricslog import read_complete
    try:  # a run being written: only its whole row groups
        df = read_complete(metrics, attrs.get("config", {}).get("pairs"))
    except (ValueError, pd.errors.ParserError) as e:
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv is not a metrics table ({_first_line(e)})") from None
    if not {"round", "pair", "disc"} <= set(df.columns):
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv lacks the columns round, pair, disc")
    df.attrs.update(attrs)
    return df


def read_json(path: Path, what: str) -> dict:
    """The mapping in the run's JSON file ``path`` (``what``: config, summary, constants), refused as
    :func:`~stabkit.store.mapping.read_mapping` refuses a damaged file, with how to repair it."""
    return read_mapping(path, what, f"{what} file of a run", hint="; restore it or rerun the run that wrote it")


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def load_local(path) -> pd.DataFrame:
    """Local-discrepancy rows (round, pair, k, l1_a, l1_b, l2, l3) of a run."""
    from stabkit.store.metricslog import read_complete

    return read_complete(Path(path) / "local.csv")
