"""Atomic writes, the one way every file of a run directory is written.

A file is written to a temporary sibling, ``fsync``-ed and moved over its path with ``os.replace``, so a
reader (or an interrupted run) sees the old file or the new one, never a half-written one; a full disk is
the one-line ``DiskFull`` naming the file. JSON is strict (NaN and ±Infinity written as ``null``), CSV floats
keep 10 significant digits. This module is the leaf of ``stabkit.store``: every other format writes through it.
"""
from __future__ import annotations

import errno
import json
import math
import os
import shutil
from pathlib import Path

from stabkit.errors import DiskFull
from stabkit.store.filemode import shared_tempfile


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling and move it over ``path``; a full disk raises ``DiskFull``."""
    _atomic_write(path, text, "w")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes, written as they are (a file a sweep's job returned)."""
    _atomic_write(path, data, "wb")


def _atomic_write(path: Path, data, mode: str) -> None:
    path = Path(path)
    tmp = None
    try:
        fd, tmp = shared_tempfile(path)  # the umask's mode (0644 by default), not mkstemp's 0600
        with os.fdopen(fd, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise_if_disk_full(e, path, len(data.encode() if isinstance(data, str) else data))
        raise


def raise_if_disk_full(e: BaseException, path: Path, nbytes: int) -> None:
    """Turn a full-disk ``OSError`` while writing ``nbytes`` to ``path`` into the one-line ``DiskFull``."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        free = shutil.disk_usage(path.parent).free if path.parent.is_dir() else 0
        needed = f"{nbytes} bytes needed, " if nbytes else ""
        err = DiskFull(f"cannot write {str(path)!r}: no space left on the device ({needed}{free} free); the files "
                       f"written before are intact")
        err.filename = str(path)
        raise err from None


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


def atomic_write_csv(path: Path, df) -> None:
    atomic_write_text(path, df.to_csv(index=False, float_format="%.10g"))


def _json_default(o):
    if hasattr(o, "tolist"):
        return o.tolist()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def atomic_save(path: Path, obj) -> None:
    """``torch.save`` to a temporary sibling, fsync, rename: readers and a killed run see the old file or
    the new one, never a torn one."""
    import torch  # on use: reading a run's JSON and CSV files needs no torch
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = shared_tempfile(path)  # the umask's mode (0644 by default), not mkstemp's 0600
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise_if_disk_full(e, path, 0)
        raise
