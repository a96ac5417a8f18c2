"""D_T at matched accuracy: each algorithm's discrepancy where it reaches a common accuracy level.

A tuned atlas measures every algorithm at every value of the grid, so each has a curve of (test quality,
D_T) points, one per value: test accuracy, or minus the test loss for regression (higher is better). Per
table (task x perturbation) the **level** is the lowest best quality of the learning algorithms (those with at
least one ``ok`` point; their best ``ok`` quality each), leaving out the low outliers: a best below Tukey's
fence Q1 - 1.5 IQR of the bests (with four or more learning algorithms). It is the highest level every other
learning algorithm reaches somewhere on the grid; the outliers -- DP-FedAvg at strong noise, a method this
task's grid hardly trains -- say "not reached" instead of dragging every comparison down to their accuracy.
Along each algorithm's curve -- its points
that did not diverge or fail (``ok`` or ``no learning``: a measured accuracy either way), at its chosen
values of any further tuned axis -- in increasing order of the tuned value (smaller steps first, where D_T
is smallest), D_T is interpolated linearly between the last point below the level and the first at or
above it, its 95% half-width likewise. Where the smallest value tried already reaches the level, the
algorithm may reach it at a still smaller value: its D_T there is an upper end, marked ``<=`` (the atlas
extends such curves downward first, :mod:`stabkit.atlas.extend`). An algorithm with no ``ok`` point
(no learning, diverged everywhere) has "not reached".
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from stabkit.atlas.link import quality

FENCE_MIN = 4  # learning algorithms a table needs before its low outliers are left out of the level


def matched_level(table: pd.DataFrame) -> float:
    """The level of one table's cells (every grid value of every algorithm): see the module docstring."""
    ok = table[table["status"] == "ok"]
    if not len(ok):
        return math.nan
    best = quality(ok).groupby(ok["algo"]).max().to_numpy(float)
    if len(best) >= FENCE_MIN:
        q1, q3 = np.percentile(best, [25, 75])
        best = best[best >= q1 - 1.5 * (q3 - q1)]
    return float(best.min())


def curve(points: pd.DataFrame, key: str) -> pd.DataFrame:
    """One algorithm's points with a measured accuracy (``ok`` or ``no learning``), in increasing ``key``."""
    measured = points["status"].isin(["ok", "no learning"]) & quality(points).notna()
    return points[measured].sort_values(f"param.{key}")


def at_level(points: pd.DataFrame, key: str, level: float) -> dict:
    """D_T of one algorithm's cells ``points`` at quality ``level``: ``{"D": , "hw": , "upper": bool}``,
    or ``{}`` where its curve never reaches it (or it has no ``ok`` point)."""
    if not (points["status"] == "ok").any():
        return {}
    ok = curve(points, key)
    q = quality(ok).to_numpy(float)
    d, hw = ok["D_T"].to_numpy(float), ok["D_T.hw"].fillna(0).to_numpy(float)
    reached = np.flatnonzero(q >= level) if math.isfinite(level) else []
    if not len(reached):
        return {}
    i = int(reached[0])
    if i == 0:
        return {"D": float(d[0]), "hw": float(hw[0]), "upper": True}
    w = (level - q[i - 1]) / (q[i] - q[i - 1])
    return {"D": float(d[i - 1] + w * (d[i] - d[i - 1])), "hw": float(hw[i - 1] + w * (hw[i] - hw[i - 1])),
            "upper": False}


def on_line(points: pd.DataFrame, key: str, point: dict | None) -> pd.DataFrame:
    """The points at ``point``'s values of every key but ``key`` (its other tuned axes); all without one."""
    for k, v in (point or {}).items():
        if k != key:
            points = points[points[f"param.{k}"] == v]
    return points


def matched_table(grid: pd.DataFrame, key: str, chosen: dict | None = None) -> pd.DataFrame:
    """One row per (task, perturb, algo) of the grid's cells: the table's ``level`` and ``D_T@level`` with
    its half-width (``D_T@level.hw``), ``upper``, the ``key`` values of its curve (``line``) and the page's
    text (``matched``, "not reached"). ``chosen`` ((task, algo) -> point): each curve at its chosen values
    of the other tuned axes."""
    rows = []
    for (task, perturb), table in grid.groupby(["task", "perturb"], sort=False):
        level = matched_level(table)
        for algo, points in table.groupby("algo", sort=False):
            points = on_line(points, key, (chosen or {}).get((task, algo)))
            m = at_level(points, key, level)
            text = "not reached" if not m else (("≤ " if m["upper"] else "") + f"{m['D']:.3g} ± {m['hw']:.2g}")
            rows.append({"task": task, "perturb": perturb, "algo": algo, "level": level,
                         "D_T@level": m.get("D", math.nan), "D_T@level.hw": m.get("hw", math.nan),
                         "upper": m.get("upper", False), "matched": text,
                         "line": tuple(curve(points, key)[f"param.{key}"])})
    return pd.DataFrame(rows)


def level_text(level: float, regression: bool) -> str:
    """``test acc 0.853`` / ``test loss 0.12`` (the level in the table's own units)."""
    return f"test loss {-level:.3g}" if regression else f"test acc {level:.3g}"
