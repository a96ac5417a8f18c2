"""Output directories: checked before a command computes, created before it writes, gone again if it fails.

A command that computes for minutes and then finds its ``--out`` unwritable (an existing file, a read-only
place, a parent that is a file) throws the work away; one that creates its ``--out`` and then refuses an
input leaves an empty folder behind. So every command checks its output directory up front
(:func:`check_writable`, creating nothing: a refused command leaves no trace) and writes into
:func:`output_dir`, which creates the directory (and its missing parents), probes it, and removes the
directories it created if the command then fails before writing anything into them.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from stabkit.errors import ConfigError
from stabkit.store.fserrors import undone_on_fs_error

FIGURES = "figures"  # OUT/figures: where a command draws its figures (a run's, a sweep report's, an atlas's)
NAME_MAX = 255  # bytes in one file name on every common file system (ext4, xfs, btrfs, tmpfs, APFS, NTFS)


def check_writable(path, field: str = "out") -> None:
    """ConfigError (one line) unless ``path`` is a writable directory or can be created as one; nothing is
    created."""
    path = Path(path)

    def refuse(why: str):
        raise ConfigError(f"invalid {field}={str(path)!r}: {why}; give a directory you can write to")

    too_long = [part for part in path.parts if len(os.fsencode(part)) > NAME_MAX]
    if too_long:
        refuse(f"the name {too_long[0][:40] + '…'!r} has {len(os.fsencode(too_long[0]))} bytes, more than the "
               f"{NAME_MAX} a file name may have")
    if path.is_symlink() and not path.exists():
        refuse("it is a broken symbolic link")
    if path.exists() and not path.is_dir():
        refuse("it is an existing file, not a directory")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        refuse(f"{str(existing)!r} is a file, so no directory can be created under it")
    try:  # a probe file, not os.access: root, ACLs, read-only mounts and pseudo file systems all answer truly
        tempfile.NamedTemporaryFile(dir=existing, prefix=".stabkit-probe", delete=True).close()
    except OSError as e:
        where = "it is" if existing == path else f"{str(existing)!r}, where it would be created, is"
        refuse(f"{where} not writable ({e.strerror})")


def prepare_dir(path, field: str = "out") -> Path:
    """Create ``path`` (and parents) or fail with a one-line error if it cannot be written."""
    path = Path(path)
    check_writable(path, field)
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.NamedTemporaryFile(dir=path, prefix=".probe", delete=True).close()
    except OSError as e:
        raise ConfigError(f"invalid {field}={str(path)!r}: the output directory must be writable "
                          f"({e.strerror})") from None
    return path


@contextlib.contextmanager
def output_dir(path, field: str = "out"):
    """``with output_dir(OUT) as out:`` compute and write into ``out``; ``OUT`` and its missing parents are
    created (after :func:`check_writable`) and, if the body raises, removed again where they are still empty;
    if the file system refuses a write, what the body wrote is removed first (``stabkit.store.fserrors``)."""
    path = Path(path)
    check_writable(path, field)
    created = [p for p in (path, *path.parents) if not p.exists()]  # deepest first
    prepare_dir(path, field)
    try:
        with undone_on_fs_error(path):  # a full disk or read-only file: what the body wrote goes too
            yield path
    except BaseException:
        for p in created:
            try:
                p.rmdir()  # only an empty directory
            except OSError:
                break
        raise
