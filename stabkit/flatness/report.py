"""The flatness part of ``stabkit report``: sharpness next to the discrepancy, across the jobs of a sweep.

Written when the jobs measured sharpness (``sharpness_rounds``): ``flatness.csv`` (per level and algorithm:
D_T, lambda_max, lambda_max/lambda_5, trace, SAM and average sharpness, train loss, clients' local
lambda_max; means over seeds), ``flatness_claims.csv`` (verdicts on F1-F4, :mod:`stabkit.flatness.claims`)
and the figure ``sharpness_vs_discrepancy`` (one point per job: final discrepancy against lambda_max and
against SAM sharpness).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from stabkit.flatness.claims import LEVEL, flatness_table, verdicts
from stabkit.plotting import colors, plt, save
from stabkit.store.atomic import atomic_write_csv

PANELS = [("sharp_lambda_max", r"Hessian $\lambda_{max}$"), ("sharp_sam_0.05", "SAM sharpness, r = 0.05")]


def flatness_report(jobs: pd.DataFrame, settings: list, out: Path, plot: bool) -> dict:
    """Tables (and the scatter) for jobs with ``sharp_*`` columns; {} when there are none."""
    if "sharp_lambda_max" not in jobs or jobs["sharp_lambda_max"].isna().all():
        return {}
    done = jobs.dropna(subset=["sharp_lambda_max"])
    paths = {"flatness": out / "flatness.csv", "claims": out / "flatness_claims.csv"}
    atomic_write_csv(paths["flatness"], flatness_table(done))
    if "algo" in done:
        atomic_write_csv(paths["claims"], verdicts(done))
    else:
        paths.pop("claims")
    if plot:
        paths["figures"] = [p for p in scatter(done, settings, out) if p.suffix == ".png"]
    return paths


def scatter(jobs: pd.DataFrame, settings: list, out: Path) -> list:
    """Final discrepancy against sharpness, one point per job, coloured by setting (marker: level)."""
    colour_by = [k for k in settings if k != LEVEL] or settings
    labels = jobs[colour_by].astype(str).agg(", ".join, axis=1) if colour_by else pd.Series("all", jobs.index)
    markers = dict(zip(sorted(jobs[LEVEL].unique()), "osD^v<>p")) if LEVEL in jobs else {}
    fig, axes = plt.subplots(1, len(PANELS), figsize=(3.6 * len(PANELS), 3.2))
    for ax, (col, title) in zip(axes, PANELS):
        if col not in jobs:
            continue
        for label, color in zip(sorted(labels.unique()), colors(labels.nunique())):
            sel = jobs[labels == label]
            for i, (level, g) in enumerate(sel.groupby(LEVEL) if markers else [(None, sel)]):
                ax.scatter(g["D_T"], g[col], color=color, marker=markers.get(level, "o"), s=28,
                           edgecolor="white", lw=0.5, label=label if ax is axes[0] and i == 0 else None)
        ax.set(xlabel=r"final discrepancy $\|x_T - x'_T\|$", ylabel=title)
    for level, m in markers.items():
        axes[-1].scatter([], [], color="0.4", marker=m, label=f"{LEVEL} = {level:g}")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.suptitle("sharpness vs discrepancy (one point per job)", y=1.02, fontsize=9)
    fig.tight_layout()
    return save(fig, out, "sharpness_vs_discrepancy")
