"""Append-only CSV logs (``metrics.csv``, ``local.csv``): each flush appends its rows, never rewrites them.

Rewriting the whole file at every flush is quadratic in the number of rounds; appending is linear. A
flush appends one *row group* (the rows of the rounds since the last flush) with a single ``write`` and
``fsync``\\ s it. The header is fixed at the first flush; a later group that brings a column the header
lacks (e.g. the part-loss columns first appear at the first evaluated round after round 0) rewrites the
file once, atomically, with the wider header -- columns keep their order of first appearance, so the
file is byte-identical to writing all rows at once, whatever the flush or resume points.

Readers (``read_complete``) see only whole row groups: a group cut by a kill has no trailing newline or
is a round with fewer rows than the run has pairs, and is dropped. ``truncate`` cuts a log back to its
first n data rows (resume continues from a checkpoint's position).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from stabkit.store.atomic import atomic_write_text, raise_if_disk_full

if TYPE_CHECKING:
    import pandas as pd

FLOAT_FORMAT = "%.10g"


def rows_frame(groups: list) -> pd.DataFrame:
    """One DataFrame of row groups, each a dict ``column -> array`` of one round's rows: columns in order of
    first appearance, NaN where a group lacks a column -- what ``pd.concat`` of per-round DataFrames gives,
    built once per flush instead of a DataFrame per round (W1: 1.3 of a paired round's 8.3 ms went into
    per-round DataFrames). pandas is imported at the first flush, not with the run (0.4-0.8 s of start-up)."""
    import pandas as pd

    columns = list(dict.fromkeys(name for group in groups for name in group))
    sizes = [len(next(iter(group.values()))) for group in groups]
    return pd.DataFrame({name: np.concatenate([np.asarray(group[name]) if name in group else np.full(n, np.nan)
                                               for group, n in zip(groups, sizes)]) for name in columns})


def _csv(df: pd.DataFrame, header: bool) -> str:
    return df.to_csv(index=False, header=header, float_format=FLOAT_FORMAT)


class AppendLog:
    """A CSV file grown by appending row groups; ``rows`` counts its data rows."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.columns: list = []
        self.rows = 0
        if self.path.is_file():  # continuing an existing log (resume): its header and length
            with open(self.path) as f:
                first = f.readline()
                self.columns = first.rstrip("\n").split(",") if first.endswith("\n") else []
                self.rows = sum(1 for line in f if line.endswith("\n"))

    def append(self, groups: list) -> None:
        """Append the rows of ``groups`` (dicts ``column -> array``, see :func:`rows_frame`) as one group."""
        if not groups:
            return
        df = rows_frame(groups)
        new = [c for c in df.columns if c not in self.columns]
        if new or not self.path.is_file():
            self._widen(self.columns + new, df)
        else:
            data = _csv(df.reindex(columns=self.columns), header=False).encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            size = os.fstat(fd).st_size
            try:
                os.write(fd, data)
                os.fsync(fd)
            except OSError as e:  # a partly written group is cut off again: the file ends with its last whole group
                os.ftruncate(fd, size)
                raise_if_disk_full(e, self.path, len(data))
                raise
            finally:
                os.close(fd)
        self.rows += len(df)

    def _widen(self, columns: list, df: pd.DataFrame) -> None:
        """Rewrite the file (atomically) with header ``columns``, its rows so far, then ``df``."""
        import pandas as pd

        old = read_complete(self.path) if self.path.is_file() else pd.DataFrame(columns=self.columns)
        both = pd.concat([old, df], ignore_index=True) if len(old) else df
        atomic_write_text(self.path, _csv(both.reindex(columns=columns), header=True))
        self.columns = columns

    def truncate(self, rows: int) -> None:
        """Keep the header and the first ``rows`` data rows (dropping any partial trailing group); a log never
        written (a run without ``--local-rounds`` has no ``local.csv``) stays unwritten."""
        if rows == 0 and not self.path.is_file():
            return
        lines = self.path.read_text().splitlines(keepends=True)
        kept = [line for line in lines[: rows + 1] if line.endswith("\n")]
        atomic_write_text(self.path, "".join(kept))
        self.rows = len(kept) - 1


def read_complete(path, rows_per_round: int | None = None) -> pd.DataFrame:
    """The whole row groups of a log being written: drops an unterminated last line and, with
    ``rows_per_round``, a last round that has fewer rows (a group cut by a kill)."""
    import pandas as pd

    text = Path(path).read_text()
    text = text[: text.rfind("\n") + 1]
    if not text:
        return pd.DataFrame()
    df = pd.read_csv(io.StringIO(text))
    if rows_per_round and len(df) and "round" in df:
        last = df["round"].iloc[-1]
        if (df["round"] == last).sum() < rows_per_round:
            df = df[df["round"] != last].reset_index(drop=True)
    return df
