"""Temporary files for atomic writes that end with the mode the user's umask gives new files.

``tempfile.mkstemp`` creates its file with mode 0600 so that no one else can read it while it is private;
the atomic writes rename that file over the result, which would keep 0600 and hide every result from a
colleague on a shared machine or cluster. :func:`shared_tempfile` gives the temporary file the mode an
ordinary ``open`` would (0666 minus the umask: 0644 by default) before anything is written to it.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def umask() -> int:
    """The process's umask (read by setting it and restoring it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def shared_tempfile(path) -> tuple[int, str]:
    """``(fd, name)`` of a new temporary sibling of ``path`` with the umask's file mode."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o666 & ~umask())
    return fd, tmp
