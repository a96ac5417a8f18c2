"""Frontier and link: which cells no other beats on both stability and accuracy, and whether stability
predicts the generalisation gap.

* ``pareto_front(cells)``: per table (task x perturbation), the cells with ``status == ok`` that no other
  ``ok`` cell beats on both a smaller D_T and a better quality (higher test accuracy; for regression a
  lower test loss), at least as good on both and strictly better on one.
* ``rank_correlation(cells)``: Spearman's ρ between D_T and the gap (test − train loss) over the ``ok``
  cells, its p-value and a percentile bootstrap 95% interval over cells (resampled with replacement);
  below :data:`MIN_CELLS` cells no ρ at all (``corr_text`` says "too few cells (n)"): over 3 cells a
  bootstrap interval is [−1, 1] whatever the data, and ρ takes one of four values.
* ``stability_check(cells)``: the stability theorem's inequality |E gen gap| ≤ Ĝ · E‖x_T − x′_T‖ per cell,
  with Ĝ the estimated gradient bound (``constants.json``'s G: the largest per-sample gradient norm at
  the run's snapshots), counted as "holds in n of m cells".
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

BOOTSTRAP = 2000
MIN_CELLS = 6  # fewest cells a rank correlation is reported over


def quality(cells: pd.DataFrame) -> pd.Series:
    """Higher is better: test accuracy where measured, else minus the test loss."""
    nan = pd.Series(np.nan, index=cells.index)
    acc = cells["test_acc"] if "test_acc" in cells else nan
    return acc.where(acc.notna(), -(cells["test_loss"] if "test_loss" in cells else nan))


def pareto_front(cells: pd.DataFrame) -> pd.Series:
    """Boolean per cell: on its table's stability-quality Pareto front (``ok`` cells only)."""
    q = quality(cells)
    front = pd.Series(False, index=cells.index)
    for _, idx in cells.groupby(["task", "perturb"]).groups.items():
        ok = [i for i in idx if cells.at[i, "status"] == "ok"]
        for i in ok:
            beaten = any(cells.at[j, "D_T"] <= cells.at[i, "D_T"] and q[j] >= q[i]
                         and (cells.at[j, "D_T"] < cells.at[i, "D_T"] or q[j] > q[i]) for j in ok if j != i)
            front[i] = not beaten
    return front


def rank_correlation(cells: pd.DataFrame, x: str = "D_T", y: str = "gap", seed: int = 0) -> dict:
    """Spearman ρ of ``x`` and ``y`` over the ``ok`` cells with a bootstrap 95% interval."""
    ok = cells[(cells["status"] == "ok") & cells[x].notna() & cells[y].notna()]
    n = len(ok)
    if n < MIN_CELLS:
        return {"n": n, "rho": float("nan"), "p": float("nan"), "lo": float("nan"), "hi": float("nan")}
    a, b = ok[x].to_numpy(float), ok[y].to_numpy(float)
    res = stats.spearmanr(a, b)
    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(BOOTSTRAP):
        i = rng.integers(0, n, n)
        if np.ptp(a[i]) > 0 and np.ptp(b[i]) > 0:
            boot.append(stats.spearmanr(a[i], b[i]).statistic)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {"n": n, "rho": float(res.statistic), "p": float(res.pvalue), "lo": float(lo), "hi": float(hi)}


def corr_text(c: dict) -> str:
    """``ρ = 0.52 [0.10, 0.81] over 12 cells``, or ``too few cells (n)`` below :data:`MIN_CELLS`."""
    if c["n"] < MIN_CELLS or not np.isfinite(c["rho"]):
        return f"too few cells ({c['n']})"
    return f"ρ = {c['rho']:.2f} [{c['lo']:.2f}, {c['hi']:.2f}] over {c['n']} cells"


def stability_check(cells: pd.DataFrame) -> dict:
    """|gap| ≤ Ĝ · D_T per ``ok`` cell with a finite Ĝ: per-cell ``holds`` and the count."""
    ok = cells[(cells["status"] == "ok") & cells["G"].notna() & cells["gap"].notna()]
    holds = (ok["gap"].abs() <= ok["G"] * ok["D_T"])
    slack = (ok["G"] * ok["D_T"]) / ok["gap"].abs()
    return {"n": int(holds.sum()), "m": int(len(ok)), "holds": holds,
            "min_ratio": float(slack.min()) if len(ok) else float("nan")}


def link_summary(cells: pd.DataFrame) -> dict:
    """Correlations (all cells, per perturbation, per task, per table) and the theorem check, as plain numbers."""
    out = {"all": rank_correlation(cells), "client_gap": rank_correlation(cells, y="client_gap")}
    for col in ("perturb", "task"):
        for value, g in cells.groupby(col):
            out[f"{col}={value}"] = rank_correlation(g)
    for (task, perturb), g in cells.groupby(["task", "perturb"], sort=False):  # within a table: no scale effects
        out[f"{task}/{perturb}"] = rank_correlation(g)
    check = stability_check(cells)
    out["theorem"] = {k: v for k, v in check.items() if k != "holds"}
    return out
