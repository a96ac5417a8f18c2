"""One sweep driver per sweep directory: ``DIR/sweep.lock`` names the owner (pid, host, start time).

Two ``stabkit sweep`` processes on the same ``--out`` would both run every job; the second is refused
with one line naming the owner. The lock file is created with its content in one step (a hard link of a
finished temporary file), so a reader never sees an empty lock. A lock left by a process that no longer
runs on this host is stale and taken over; a lock from another host cannot be checked and is reported with
the command to remove it.
"""
from __future__ import annotations

import json
import os
import socket
import time
from contextlib import contextmanager
from pathlib import Path

from stabkit.errors import ConfigError
from stabkit.store.filemode import shared_tempfile

LOCK = "sweep.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _owner(path: Path):
    try:
        owner = json.loads(path.read_text())
        return owner if isinstance(owner, dict) and isinstance(owner.get("pid"), int) else None
    except (OSError, ValueError):
        return None


def _stale(owner) -> bool:
    return owner is None or owner.get("host") == socket.gethostname() and not _alive(owner["pid"])


def _create(path: Path, me: dict) -> bool:
    """Create ``path`` holding ``me`` unless it exists (atomic: link of a written temporary file)."""
    fd, tmp = shared_tempfile(path)  # readable by whoever may share the sweep (the umask's mode)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


@contextmanager
def sweep_lock(root):
    """Hold ``root/sweep.lock`` for the duration; refuse (``ConfigError``) if a live driver holds it."""
    path = Path(root) / LOCK
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    while not _create(path, me):
        owner = _owner(path)
        if not _stale(owner):
            raise ConfigError(f"invalid out={str(root)!r}: another stabkit sweep is running in it (pid {owner['pid']} "
                              f"on {owner['host']}, since {owner.get('started', '?')}); wait for it to finish, or "
                              f"delete {path} if that process is gone")
        path.unlink(missing_ok=True)  # stale: its owner is gone
    try:
        yield
    finally:
        if _owner(path) == me:
            path.unlink(missing_ok=True)
