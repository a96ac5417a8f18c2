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
from stabkit.atlas.tuning import Tune, at_chosen, point_text

# The tuned view's extra page columns (key, label, help, left-aligned), after the algorithm's name
TUNED_COLUMNS = [
    ("tuned", "tuned value", "the grid point with the best validation score at T (validation split of the training "
     "clients; ties to the smaller); on the grid's edge, extended beyond it until interior: in parentheses what "
     "stopped it (the value beyond worse or diverged, the limit of 4 values, the range's end)", False),
    ("matched", "D_T at matched acc", "D_T interpolated along the algorithm's grid curve at the table's matched "
     "level (the lowest best accuracy of the learning algorithms, low outliers left out); ≤: reached at the "
     "grid's smallest value", False),
]


def _view(cells: pd.DataFrame, keys: list) -> pd.DataFrame:
    axes = [c.removeprefix("param.") for c in cells.columns if c.startswith("param.")
            and c.removeprefix("param.") not in keys]
    return label_rows(rank_cells(cells.reset_index(drop=True)), axes)


def tuned_text(point: dict, key: str, edges: list) -> str:
    """``0.1``; ``0.4 (0.8 diverged)`` / ``3.2 (limit)`` / ``0.1, beta 0.95 (beta: 0.975 worse)`` where the
    choice sits on or beyond its grid's edge: what stopped the extension there (:mod:`stabkit.atlas.extend`)."""
    notes = [("" if e.key == key else f"{e.key.removeprefix('hp.')}: ") + e.text() for e in edges]
    return point_text(point, key) + (f" ({'; '.join(notes)})" if notes else "")


def tuned_view(grid: pd.DataFrame, tune: Tune, chosen: dict, edges: dict) -> pd.DataFrame:
    """The cells at the chosen points, ranked, with ``tuned`` (and ``tuned.sort``), ``matched`` (and
    ``matched.sort``) and the table's matched ``level``; ``edges``: (task, algo) -> its choice's edges."""
    view = _view(at_chosen(grid, chosen), tune.keys())
    matched = matched_table(grid, tune.key, chosen).drop(columns=["line"])
    view = view.merge(matched, on=["task", "perturb", "algo"], how="left")
    text = [tuned_text(chosen[(t, a)], tune.key, edges.get((t, a), [])) for t, a in zip(view["task"], view["algo"])]
    return view.assign(**{"tuned": text, "tuned.sort": view[f"param.{tune.key}"], "matched.sort": view["D_T@level"]})


def equal_view(grid: pd.DataFrame, tune: Tune, shared: dict) -> pd.DataFrame:
    """The cells at the suite's shared point (``(task, algo) -> point``), ranked; empty where the grid does not
    hold it."""
    return _view(at_chosen(grid, shared), tune.keys())


def grid_view(grid: pd.DataFrame, tune: Tune, chosen: dict) -> pd.DataFrame:
    """Every cell of the grid, named by the algorithm alone, with its table's matched ``level``."""
    levels = matched_table(grid, tune.key, chosen)[["task", "perturb", "algo", "level"]]
    return _view(grid, tune.keys()).merge(levels, on=["task", "perturb", "algo"], how="left")
