"""Finding a data set's published files under ``--data-dir``, and the one-line error when they are not right.

Every file-backed task names the file it expected, where, and in what format, in a single
:class:`~stabkit.errors.ConfigError` line (the CLI prints it and exits 2), whether the file is missing
or malformed.
"""
from __future__ import annotations

from pathlib import Path

from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError, require


def data_dir(opts: TaskOptions, task: str) -> Path:
    """The ``data_dir`` option as a directory that exists."""
    require(opts.data_dir is not None, "data_dir", opts.data_dir,
            f"a directory holding the {task} files (needed by task {task}; see docs/tasks.md)")
    path = Path(opts.data_dir)
    require(path.is_dir(), "data_dir", opts.data_dir, f"an existing directory holding the {task} files")
    return path


def malformed(task: str, path: Path, fmt: str, problem: str) -> ConfigError:
    """The error for a file that is missing or not in the expected format."""
    return ConfigError(f"{task}: expected {fmt} at {path}, but it {problem}")


def locate(root: Path, folders: tuple, names: tuple, task: str, fmt: str) -> Path:
    """``root/<folder>/<name>`` for the first folder of ``folders`` ('' = ``root`` itself) and name of
    ``names`` (alternative spellings, e.g. with and without ``.gz``) that exists."""
    for folder in folders:
        for name in names:
            if (root / folder / name).exists():
                return root / folder / name
    raise malformed(task, root / folders[0] / names[0], fmt, "does not exist"
                    + (f" (nor {', '.join(names[1:])})" if len(names) > 1 else ""))
