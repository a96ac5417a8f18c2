"""File-system refusals: a full disk, a read-only folder or a name too long, as one line naming the path.

Every writer of stabkit (run, resume, sweep, atlas, report, sharpness, landscape) ends the same way when the
file system says no: a :class:`FileSystemRefused` (a ``ConfigError``: the CLI prints ``error: ...`` and exits
with status 2) naming the path and the cause, with what the command created removed
(:func:`undone_on_fs_error`). :func:`require_space` checks, before a command changes anything, that it can
write a given number of bytes where it will write them (a resume deletes ``summary.json`` and cuts the logs
back only after that).
"""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from stabkit.errors import ConfigError, DiskFull

CAUSES = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
          errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
          errno.EPERM: "operation not permitted", errno.ENAMETOOLONG: "file name too long"}
"""The ``OSError`` numbers that mean the file system refuses the write, and how the message says so."""


class FileSystemRefused(ConfigError):
    """The file system refused a write: one line naming the path and the cause (``errno``, ``filename``)."""

    def __init__(self, message: str, errno_: int, filename):
        super().__init__(message)
        self.errno, self.filename = errno_, filename


def is_fs_refusal(e: BaseException) -> bool:
    """Whether ``e`` is a file system refusing a write (full, read-only, no permission, name too long)."""
    return isinstance(e, (DiskFull, FileSystemRefused)) or isinstance(e, OSError) and e.errno in CAUSES


def refusal(e: BaseException, path=None, done: str = "") -> FileSystemRefused:
    """The one-line refusal for ``e`` (an ``OSError``, the ``DiskFull`` raised for one, or a refusal of an
    inner writer) naming its file (else ``path``); ``done``: what was done about it (e.g. what was removed)."""
    where = getattr(e, "filename", None) or path
    # DiskFull is raised while handling the OSError
    code = getattr(e.__context__, "errno", errno.ENOSPC) if isinstance(e, DiskFull) else e.errno
    target = f" {str(where)!r}" if where is not None else ""
    return FileSystemRefused(f"cannot write{target}: {CAUSES.get(code, os.strerror(code))}"
                             f"{'; ' + done if done else ''}; free space, choose a writable folder or a shorter name",
                             code, where)


@contextlib.contextmanager
def undone_on_fs_error(path, keep: Callable[[], bool] = lambda: False):
    """``with undone_on_fs_error(OUT):`` write into the directory ``OUT``; if the file system refuses a write,
    everything the body created is removed (``OUT`` itself if it did not exist before, else the entries that
    were not in it) unless ``keep()`` says it is worth keeping (a run with a checkpoint to resume from), and a
    one-line :class:`FileSystemRefused` (or the ``DiskFull`` raised) takes its place."""
    path = Path(path)
    try:
        existed = path.is_dir()
        before = set(os.listdir(path)) if existed else set()
    except OSError:  # a name too long, an unreadable parent: what is there is unknown, so nothing is removed
        existed, before = None, set()
    try:
        yield path
    except BaseException as e:
        if not is_fs_refusal(e):
            raise
        if keep():
            raise
        _remove_created(path, existed, before)
        raise refusal(e, path, f"removed what this command had written to {str(path)!r}") from None


def _remove_created(path: Path, existed, before: set) -> None:
    if existed is None:
        return
    if not existed:
        shutil.rmtree(path, ignore_errors=True)
        return
    for name in set(os.listdir(path)) - before if path.is_dir() else ():
        entry = path / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def require_space(directory, nbytes: int, field: str) -> None:
    """One-line ``ConfigError`` for ``field`` unless ``nbytes`` can be written into ``directory`` now: a probe
    file is given that size (``posix_fallocate``: the file system reserves the blocks or says no) and
    removed. Nothing is left behind either way."""
    directory = Path(directory)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".stabkit-space")
        try:
            os.posix_fallocate(fd, 0, max(int(nbytes), 1))
        finally:
            os.close(fd)
            os.unlink(tmp)
    except OSError as e:
        raise ConfigError(f"invalid {field}={str(directory)!r}: cannot write {nbytes:,} bytes there "
                          f"({CAUSES.get(e.errno, e.strerror)}); nothing was changed") from None
