"""Run directories: ``config.json``, ``metrics.csv``, ``local.csv``, ``summary.json``, written atomically.

Every file is written to a temporary sibling and moved into place with ``os.replace``, so a reader (or
an interrupted run) never sees a half-written file. ``load_run`` returns the per-round metrics as a
pandas DataFrame with the run's config and summary in ``df.attrs``.
"""
from __future__ import annotations

import json
import os
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


def require_out(out) -> None:
    """Refuse an empty ``--out`` (it would silently mean the current directory)."""
    if out is not None and not str(out).strip():
        raise ConfigError(f"invalid out={str(out)!r}: a directory path (or leave --out out for the default)")


def prepare_run_dir(path) -> Path:
    """Create ``path`` (and parents) or fail with a one-line error if it cannot be written."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".probe", delete=True)
        probe.close()
    except OSError as e:
        raise ConfigError(f"invalid out={str(path)!r}: the output directory must be writable ({e.strerror})") from None
    return path


def load_run(path) -> pd.DataFrame:
    """Per-round metrics of a run (one row per round x pair); ``attrs['config']``, ``attrs['summary']``."""
    path = Path(path)
    metrics = path / "metrics.csv"
    if not metrics.is_file():
        raise ConfigError(f"invalid run={str(path)!r}: expected a run directory containing metrics.csv")
    df = pd.read_csv(metrics)
    for name in ("config", "summary"):
        f = path / f"{name}.json"
        if f.is_file():
            df.attrs[name] = json.loads(f.read_text())
    return df


def load_local(path) -> pd.DataFrame:
    """Local-discrepancy rows (round, pair, k, l1_a, l1_b, l2, l3) of a run."""
    return pd.read_csv(Path(path) / "local.csv")
