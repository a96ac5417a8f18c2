"""The atlas figures: discrepancy curves as small multiples (one panel per task x perturbation, one line
per algorithm, named by its title, each with its own colour and marker), the stability-accuracy frontier
per panel, the gap-vs-discrepancy scatter over all cells, and D_T against epsilon for the DP cells."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import NullFormatter

from stabkit.atlas.link import corr_text, pareto_front, quality
from stabkit.plotting import STYLE, line_styles, plt, save, sns

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _panels(cells: pd.DataFrame) -> list:
    return list(cells.groupby(["task", "perturb"], sort=False))


def _grid(n_panels: int, ncols: int, size=(4.2, 3.3)):
    ncols = min(ncols, n_panels)
    nrows = -(-n_panels // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def draw_curves(cells: pd.DataFrame, out: Path, titles: dict) -> Path:
    """Mean D_t per cell, one panel per table; a line per setting with a style shared by all panels."""
    sns.set_theme(**STYLE)
    names = list(dict.fromkeys(cells["name"]))
    styles = dict(zip(names, line_styles(len(names), markevery=0.1)))
    panels = _panels(cells)
    fig, axes = _grid(len(panels), 2)
    for ax, ((task, perturb), g) in zip(axes, panels):
        finals = [c[-1] for c in g["curve"] if isinstance(c, np.ndarray) and np.isfinite(c[-1]) and c[-1] > 0]
        log = len(finals) > 1 and max(finals) / min(finals) > 30
        for _, row in g.iterrows():
            c = row["curve"]
            if not isinstance(c, np.ndarray):
                continue
            t = np.arange(len(c))
            ax.plot(t[1:] if log else t, c[1:] if log else c, lw=1.4, ms=3.5, **styles[row["name"]],
                    alpha=1.0 if row["status"] == "ok" else 0.45)
        ax.set(title=f"{titles.get(task, task)}\n{perturb} perturbation", xlabel="round t",
               ylabel=r"$\|x_t - x'_t\|$", yscale="log" if log else "linear")
    handles = [plt.Line2D([], [], lw=1.6, ms=3.5, **styles[n]) for n in names]
    fig.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 0.98), fontsize=8, handlelength=3,
               title="faded: no learning / diverged", title_fontsize=7)
    fig.tight_layout()
    return _png(save(fig, out, "curves"))


def label_without_overlap(ax, xs, ys, names, fontsize: float = 7.0) -> list:
    """Name the points ``(xs, ys)`` beside them, labels pushed apart vertically where they would overlap
    (a line joins a moved label to its point), kept inside the axes; returns the text objects."""
    if not len(names):
        return []
    fig = ax.figure
    fig.canvas.draw()  # the limits and transforms as drawn
    px = ax.transData.transform(np.column_stack([xs, ys]))
    lo, hi = ax.transAxes.transform([(0, 0.03), (0, 0.97)])[:, 1]
    gap = 1.35 * fontsize * fig.dpi / 72
    order = np.argsort(px[:, 1], kind="stable")
    place = px[:, 1].clip(lo, hi)
    for below, above in zip(order, order[1:]):  # upwards: each label at least a line above the one below
        place[above] = max(place[above], place[below] + gap)
    place[order[-1]] = min(place[order[-1]], hi)  # then down from the top edge where that overflowed
    for above, below in zip(order[::-1], order[::-1][1:]):
        place[below] = min(place[below], place[above] - gap)
    right = ax.transAxes.transform([(0.72, 0)])[0, 0]
    texts = []
    for (x, y), p, name in zip(px, place, names):
        left_side = x > right  # near the right edge: the label goes to the left of its point
        dx, dy = (-6 if left_side else 6) * 72 / fig.dpi, (p - y) * 72 / fig.dpi
        moved = abs(dy) > 0.5 * fontsize
        texts.append(ax.annotate(name, ax.transData.inverted().transform((x, y)), xytext=(dx * 1.5, dy),
                                 textcoords="offset points", fontsize=fontsize, color="0.1", va="center",
                                 ha="right" if left_side else "left",
                                 arrowprops=dict(arrowstyle="-", color="0.4", lw=0.5) if moved else None))
    return texts


def draw_frontier(cells: pd.DataFrame, out: Path, titles: dict) -> Path:
    """Per table: D_T (± 95% CI) against test accuracy (or test loss); the Pareto front joined and named
    (labels kept apart; the other cells grey and unnamed: their names are in the table); log D_T axis where
    the cells span more than 30x."""
    sns.set_theme(**STYLE)
    front = pareto_front(cells)
    q = quality(cells)
    panels = _panels(cells)
    fig, axes = _grid(len(panels), 2, size=(4.6, 3.6))
    for ax, ((task, perturb), g) in zip(axes, panels):
        ok = g[g["status"] == "ok"]
        regression = ok["test_acc"].isna().all() if "test_acc" in ok else True
        y = -q[ok.index] if regression else q[ok.index]
        ax.errorbar(ok["D_T"], y, xerr=ok["D_T.hw"].fillna(0), fmt="o", ms=4, color="0.55", capsize=2, lw=0.8)
        on = ok[front[ok.index]].sort_values("D_T")
        ax.plot(on["D_T"], y[on.index], "-o", color="C3", ms=6, lw=1.5, label="Pareto front (named)")
        if len(ok) > 1 and ok["D_T"].min() > 0 and ok["D_T"].max() / ok["D_T"].min() > 30:
            ax.set_xscale("log")
        label_without_overlap(ax, on["D_T"].to_numpy(), y[on.index].to_numpy(), list(on["name"]))
        left = len(g) - len(ok)
        ax.set(title=f"{titles.get(task, task)}, {perturb}" + (f"\n({left} cells not ranked)" if left else ""),
               xlabel=r"$D_T$ (± 95% CI)", ylabel="test loss (lower is better)" if regression else "test accuracy")
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _png(save(fig, out, "frontier"))


def draw_gap_scatter(cells: pd.DataFrame, out: Path, titles: dict, corr: dict) -> Path:
    """Gap (test − train loss, ± 95% CI) against D_T over all ranked cells: colour = task, marker =
    perturbation; the Spearman ρ with its bootstrap interval in the title."""
    sns.set_theme(**STYLE)
    ok = cells[cells["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    tasks, perturbs = list(dict.fromkeys(ok["task"])), list(dict.fromkeys(ok["perturb"]))
    palette = sns.color_palette("colorblind", max(len(tasks), 1))
    for (task, perturb), g in ok.groupby(["task", "perturb"], sort=False):
        ax.errorbar(g["D_T"], g["gap"], xerr=g["D_T.hw"].fillna(0), yerr=g["gap.hw"].fillna(0), ls="none",
                    marker=MARKERS[perturbs.index(perturb) % len(MARKERS)], ms=5, capsize=2, lw=0.7,
                    color=palette[tasks.index(task)], label=f"{titles.get(task, task)}, {perturb}")
    ax.set_xscale("log")
    ax.set(xlabel=r"$D_T = E\|x_T - x'_T\|$ (± 95% CI)", ylabel="test − train loss (± 95% CI)",
           title=f"Spearman {corr_text(corr)}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _png(save(fig, out, "gap_vs_discrepancy"))


def draw_privacy(cells: pd.DataFrame, out: Path, titles: dict) -> Path:
    """Per table with DP cells: D_T (± 95% CI) against epsilon at delta = 1e-5, the accountant's (filled, joined
    in order of noise) and the measured one (open, tied to its cell by a dotted line), each point labelled with
    its noise multiplier z; FedAvg's D_T as a dashed line where the table has it (no clipping, no noise)."""
    sns.set_theme(**STYLE)
    dp = cells[np.isfinite(cells["epsilon"].astype(float))]
    panels = list(dp.groupby(["task", "perturb"], sort=False))
    fig, axes = _grid(len(panels), 2, size=(4.4, 3.4))
    for ax, ((task, perturb), g) in zip(axes, panels):
        g = g.sort_values("noise_multiplier")
        ax.plot(g["epsilon"], g["D_T"], "-", color="C0", lw=1.0)
        ax.errorbar(g["epsilon"], g["D_T"], yerr=g["D_T.hw"].fillna(0), fmt="o", color="C0", ms=5, capsize=2,
                    label=r"accountant's $\varepsilon$")
        ax.plot(g["epsilon_measured"], g["D_T"], "o", mfc="none", color="C1", ms=6, label=r"measured $\varepsilon$")
        for _, row in g.iterrows():
            ax.plot([row["epsilon_measured"], row["epsilon"]], [row["D_T"]] * 2, ":", color="0.6", lw=0.8)
            ax.annotate(f"z = {row['noise_multiplier']:g}" + ("" if row["status"] == "ok" else " (no learning)"),
                        (row["epsilon"], row["D_T"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
        plain = cells[(cells["task"] == task) & (cells["perturb"] == perturb) & (cells["algo"] == "fedavg")]
        if len(plain) and np.isfinite(plain["D_T"].iloc[0]):
            ax.axhline(plain["D_T"].iloc[0], ls="--", color="0.4", lw=1.0, label="FedAvg (no DP)")
        ax.set(xscale="log", title=f"{titles.get(task, task)}, {perturb}", ylabel=r"$D_T$ (± 95% CI)",
               xlabel=r"$\varepsilon$ at $\delta = 10^{-5}$ (log)")
        ax.xaxis.set_minor_formatter(NullFormatter())  # labelled minor ticks overlap on a span under a decade
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _png(save(fig, out, "privacy"))


def _png(paths: list) -> Path:
    plt.close("all")
    return next(p for p in paths if p.suffix == ".png")


GROUP = 8  # algorithms per panel of the stability-accuracy figure: eight colours that stay apart


def draw_stability_accuracy(grid: pd.DataFrame, tune, chosen: dict, out: Path, titles: dict) -> Path:
    """A row of panels per table, the algorithms split over the columns (at most :data:`GROUP` per panel, each
    its own colour, marker and legend entry; FedAvg in every panel as the grey reference): each algorithm's
    curve of D_T (± 95% CI, log axis) against test accuracy (test loss for regression) along the tuned key
    (``tune.key``, at its chosen values of any further axis), the chosen point ringed; the matched level
    (``level``, :mod:`stabkit.atlas.matched`) a dashed line."""
    from stabkit.atlas.matched import on_line

    sns.set_theme(**STYLE)
    key = tune.key
    names = list(dict.fromkeys(grid["name"]))
    reference = grid.loc[grid["algo"] == "fedavg", "name"].iloc[0] if (grid["algo"] == "fedavg").any() else None
    others = [n for n in names if n != reference]
    groups = [others[i:i + GROUP] for i in range(0, len(others), GROUP)] or [[]]
    panels = _panels(grid)
    fig, axes = plt.subplots(len(panels), len(groups), figsize=(5.2 * len(groups), 3.9 * len(panels)), squeeze=False)
    for row, ((task, perturb), g) in zip(axes, panels):
        regression = g["test_acc"].isna().all() if "test_acc" in g else True
        x_col = "test_loss" if regression else "test_acc"
        for ax, group in zip(row, groups):
            styles = dict(zip(group, line_styles(len(group))))
            if reference is not None:
                styles[reference] = dict(color="0.45", ls=":", marker="o")
            for name in ([reference] if reference else []) + group:
                points = g[(g["name"] == name) & (g["status"] == "ok")]
                if not len(points):
                    continue
                algo = points["algo"].iloc[0]
                p = on_line(points, key, chosen.get((task, algo))).sort_values(f"param.{key}")
                ax.errorbar(p[x_col], p["D_T"], xerr=p[f"{x_col}.hw"].fillna(0), yerr=p["D_T.hw"].fillna(0),
                            ms=4, capsize=2, lw=1.1, label=name, **styles[name])
                at = chosen.get((task, algo), {}).get(key)
                pick = p[p[f"param.{key}"] == at]
                ax.plot(pick[x_col], pick["D_T"], "o", ms=10, mfc="none", mec=styles[name]["color"], mew=1.4)
            if "level" in g and np.isfinite(g["level"].iloc[0]):
                ax.axvline(-g["level"].iloc[0] if regression else g["level"].iloc[0], ls="--", color="0.3", lw=0.9)
            ax.set_yscale("log")
            ax.set(title=f"{titles.get(task, task)}, {perturb}", ylabel=r"$D_T$ (± 95% CI)",
                   xlabel="test loss (lower is better)" if regression else "test accuracy")
            ax.legend(fontsize=6.5, loc="best", ncol=1)
    fig.suptitle(f"One point per {key} (at each algorithm's chosen values of any other tuned hyperparameter); "
                 f"ringed: tuned; dashed: matched level; dotted grey: FedAvg", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.985))
    return _png(save(fig, out, "stability_accuracy"))
