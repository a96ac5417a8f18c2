"""The two views of a tuned atlas: every algorithm at its own tuned value, and all at the suite's shared one.

Both are cut from the cells of the grid (one cell per task x perturbation x algorithm x grid value, the
top-up's pairs pooled into the cells at the chosen values) and ranked within themselves. The tuned view
carries the chosen value per cell (``tuned``) and D_T at matched accuracy (``matched``,
:mod:`stabkit.atlas.matched`); rows are named by the algorithm alone.
"""
from __future__ import annotations

import pandas as pd

from stabkit.atlas.cells import label_rows, rank_cells
from stabkit.atlas.matched import matched_table
from stabkit.atlas.tuning import at_chosen

# The tuned view's extra page columns (key, label, help, left-aligned), after the algorithm's name
TUNED_COLUMNS = [
    ("tuned", "tuned value", "the grid value with the best validation score at T (validation split of the training "
     "clients; ties to the smaller)", False),
    ("matched", "D_T at matched acc", "D_T interpolated along the algorithm's grid curve at the table's matched "
     "level (the lowest best accuracy of the learning algorithms, low outliers left out); ≤: reached at the "
     "grid's smallest value", False),
]


def _view(cells: pd.DataFrame, key: str) -> pd.DataFrame:
    axes = [c.removeprefix("param.") for c in cells.columns if c.startswith("param.") and c != f"param.{key}"]
    return label_rows(rank_cells(cells.reset_index(drop=True)), axes)


def _tuned_text(value: float, values: tuple) -> str:
    """``0.1``; ``0.2 (grid max)`` / ``0.0125 (grid min)`` where the choice sits on the grid's edge (a wider
    grid might choose beyond it)."""
    edge = " (grid max)" if value == max(values) else " (grid min)" if value == min(values) else ""
    return f"{value:g}{edge}"


def tuned_view(grid: pd.DataFrame, key: str, chosen: dict) -> pd.DataFrame:
    """The cells at the chosen values, ranked, with ``tuned`` (and ``tuned.sort``), ``matched`` (and
    ``matched.sort``) and the table's matched ``level``."""
    view = _view(at_chosen(grid, key, chosen), key)
    matched = matched_table(grid, key)
    view = view.merge(matched, on=["task", "perturb", "algo"], how="left")
    values = tuple(grid[f"param.{key}"].unique())
    return view.assign(**{"tuned": view[f"param.{key}"].map(lambda v: _tuned_text(v, values)),
                          "tuned.sort": view[f"param.{key}"], "matched.sort": view["D_T@level"]})


def equal_view(grid: pd.DataFrame, key: str, shared: dict) -> pd.DataFrame:
    """The cells at the suite's shared value of ``key`` (``(task, algo) -> value``), ranked; empty where
    the grid does not hold it."""
    return _view(at_chosen(grid, key, shared), key)


def grid_view(grid: pd.DataFrame, key: str) -> pd.DataFrame:
    """Every cell of the grid, named by the algorithm alone, with its table's matched ``level``."""
    levels = matched_table(grid, key)[["task", "perturb", "algo", "level"]]
    return _view(grid, key).merge(levels, on=["task", "perturb", "algo"], how="left")
