"""Figures of ``stabkit bounds --plot``: one consistent style, each saved as PNG and PDF.

* ``discrepancy``: ||x_t - x'_t|| per run (mean over pairs, band = min..max over pairs) with the best
  fitted growth law; in a second panel on a log scale the measured curves and the bounds whose conditions
  hold (the run's colour, each with its own line style and readable name, ``Bound.title``; equal bounds drawn
  once under one name; at most six entries); in a third the bounds whose conditions fail, grey under one
  legend line; parts that could not be computed (a fit of a too-short run) are named under it;
* ``local``: local discrepancy (L1 estimator) vs local step k at the logged rounds, with the L1 bounds;
* ``gap``: generalisation gap (test - train loss) and client-level gap (R_u - R_e) vs round;
* ``libra``: Libra's excess-risk decomposition (Corollary 1 on measured curves) with T* marked, and the
  measured test loss with its minimum (right axis); the legend sits below each panel, off the curves;
* ``fit_table``: the fit table as a figure.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from stabkit.plotting import STYLE, coincident, colors, plt, save, sns
from stabkit.store.outdir import prepare_dir

# Line styles of the bounds of one run (its colour), so bounds stay apart where colours repeat
BOUND_STYLES = [dict(ls="-"), dict(ls="--"), dict(ls="-."), dict(ls=(0, (1, 1))), dict(ls=(0, (5, 1, 1, 1, 1, 1))),
                dict(ls=(0, (8, 2))), dict(ls="-", marker="v", markevery=0.1, ms=3),
                dict(ls="--", marker="s", markevery=0.1, ms=3)]


def _note_missing(fig, analyses) -> None:
    """One line per run under the figure naming what could not be computed (e.g. a fit of a 2-round run)."""
    lines = [f"{a.label}: {part} {why}" for a in analyses for part, why in a.missing.items()]
    if lines:
        fig.text(0.01, -0.02, "\n".join(lines), ha="left", va="top", fontsize=7, color="0.3")


MAX_ENTRIES = 6  # labelled entries of the bounds panel: the measured curves and the valid bounds


def _distinct(bounds: list) -> list:
    """``(bound, label)`` per distinct curve: a bound equal at every round to an earlier one is drawn once, its
    label naming both (``FedSAGD Table 1, theorem = corrected``)."""
    same = coincident([b.values for b in bounds])
    kept = {}
    for i, (b, twin) in enumerate(zip(bounds, same)):
        if twin is None:
            kept[i] = [b, b.title]
        else:
            kept[twin][1] += f" = {b.form}" if b.source == bounds[twin].source else f" = {b.title}"
    return list(kept.values())


def _tightest(per_run: list, room: int) -> tuple:
    """Each run's valid bounds, tightest (smallest final value) first, cut to the most per run that keeps the
    panel within ``room`` entries (at least one each); also how many were left out."""
    k = max(1, max((n for n in range(1, max(map(len, per_run), default=0) + 1)
                    if sum(min(n, len(b)) for b in per_run) <= room), default=1))
    ranked = [sorted(b, key=lambda e: np.nan_to_num(e[0].values[-1], nan=np.inf))[:k] for b in per_run]
    return ranked, sum(len(b) for b in per_run) - sum(len(b) for b in ranked)


def plot_discrepancy(analyses, out: Path, log: bool = False) -> list:
    """Left: the measured distance with its fitted growth law. Middle: the measured distance against the
    bounds whose conditions hold (the run's colour; equal bounds drawn once; at most :data:`MAX_ENTRIES`
    entries, the tightest kept). Right, only where some exist: the bounds whose conditions fail, in grey under
    one legend line (drawn for reference: they guarantee nothing for these runs)."""
    sns.set_theme(**STYLE)
    shown = [[b for b in a.global_bounds() if ".theta_t" not in b.name] for a in analyses]
    failing = [[b for b in bs if not b.valid] for bs in shown]
    panels = 3 if any(failing) else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 5.4), layout="constrained")
    ax, axb = axes[0], axes[1]
    valid, left_out = _tightest([_distinct([b for b in bs if b.valid]) for bs in shown],
                                MAX_ENTRIES - len(analyses))
    low, high = np.inf, 0.0  # the bounds panel shows the measured curves and the valid bounds in full
    for a, color, own in zip(analyses, colors(len(analyses)), valid):
        curves = _plot_measured(ax, a, color)
        t, mean = np.arange(curves.shape[1]), curves.mean(0)
        axb.plot(t[1:], mean[1:], color=color, lw=2.4, label=f"{a.label}: measured")
        positive = mean[1:][mean[1:] > 0]
        low = min(low, positive.min() if len(positive) else np.inf)
        high = max([high, curves.max()] + [np.nanmax(b.values) for b, _ in own])
        for i, (b, name) in enumerate(own):
            axb.plot(t[1:], b.values[1:], color=color, lw=1.1, **BOUND_STYLES[i % len(BOUND_STYLES)],
                     label=f"{a.label}, bound: {name}")
    ylabel = "distance between the paired models $\\|x_t - x'_t\\|$"
    ax.set(xlabel="round t", ylabel=ylabel, title="Measured distance and its fitted growth")
    if log:
        ax.set_yscale("log")
    axb.set(xlabel="round t", ylabel="distance and its upper bounds (log scale)", yscale="log",
            title="Measured distance vs the bounds that apply")
    if np.isfinite(low) and high > 0:
        axb.set_ylim(low / 2, high * 20)
    for axis in (ax, axb):  # below the panel: a legend covers no curve and widens no panel
        axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    if left_out:
        axb.text(0.01, 0.99, f"+ {left_out} looser valid bounds (listed by `stabkit bounds`)",
                 transform=axb.transAxes, ha="left", va="top", fontsize=7, color="0.3")
    if any(failing):
        _plot_failing(axes[2], analyses, failing)
    _note_missing(fig, analyses)
    return save(fig, out, "discrepancy")


def _plot_measured(ax, a, color) -> np.ndarray:
    """The run's measured distance (mean over pairs, band min..max) and its fitted growth law; its curves."""
    curves = a.curves()
    t = np.arange(curves.shape[1])
    ax.plot(t, curves.mean(0), color=color, lw=2, label=f"{a.label}: measured (band: min–max over {len(curves)} pairs)")
    ax.fill_between(t, curves.min(0), curves.max(0), color=color, alpha=0.2)
    if a.fit is not None:
        ax.plot(t, a.fit.fits[a.fit.best].predict(t), color=color, ls="--", lw=1,
                label=f"{a.label}: fitted {a.fit.best} growth law")
    else:
        ax.plot([], [], ls="none", label=f"{a.label}: no growth law fitted (too few rounds)")
    return curves


def _plot_failing(ax, analyses, failing) -> None:
    """The bounds whose conditions fail, grey, beside the measured curves (the runs' colours): one legend line."""
    n = 0
    for a, color, bounds in zip(analyses, colors(len(analyses)), failing):
        mean = a.curves().mean(0)
        t = np.arange(len(mean))
        ax.plot(t[1:], mean[1:], color=color, lw=2.4, label="_measured")
        for b in bounds:
            ax.plot(t[1:], b.values[1:], color="0.6", lw=1, label="_failing")
            n += 1
    ax.plot([], [], color="0.6", lw=1, label=f"{n} bounds whose conditions fail for these runs: they guarantee "
                                              f"nothing here\n(`stabkit bounds` names each and its failed conditions)")
    ax.set(xlabel="round t", ylabel="distance (colour) and bounds (grey), log scale", yscale="log",
           title="Bounds whose conditions fail (reference only)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)


def plot_local(analyses, out: Path) -> list:
    sns.set_theme(**STYLE)
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    drew = False
    for a, color in zip(analyses, colors(len(analyses))):
        if a.local is None:
            continue
        for i, (r, g) in enumerate(a.local.groupby("round")):
            m = g.groupby("k")[["l1_a", "l1_b"]].mean().mean(axis=1)
            ax.plot(m.index, m.values, color=color, lw=2, ls=["-", "--", "-.", ":"][i % 4],
                    marker="o", ms=3, label=f"{a.label}, round {r} (L1)")
            drew = True
        for b in a.bounds:
            if b.quantity == "local_disc" and b.form == "l1" and b.derived.get("round", 0) == 0:
                ax.plot(np.arange(len(b.values)), b.values, color=color, lw=1, ls=":",
                        label=f"{a.label}: {b.title}" + ("" if b.valid else " (conditions fail)"))
    ax.set(xlabel="local step k", ylabel="max distance between clients", title="Local discrepancy (L1, shared start)")
    if drew:
        ax.set_yscale("symlog", linthresh=1e-3)
    ax.legend(fontsize=6)
    return save(fig, out, "local")


def plot_gap(analyses, out: Path) -> list:
    sns.set_theme(**STYLE)
    fig, (ax, axc) = plt.subplots(1, 2, figsize=(12, 4.2))
    for a, color in zip(analyses, colors(len(analyses))):
        df = a.df.dropna(subset=["gap_a"])
        for axis, col, title in ((ax, "gap", "test loss − train loss"), (axc, "client_gap", r"$R_u - R_e$")):
            if f"{col}_a" not in df:
                continue
            g = df.assign(v=(df[f"{col}_a"] + df[f"{col}_b"]) / 2).groupby("round")["v"]
            axis.plot(g.mean().index, g.mean().values, color=color, lw=2, label=a.label)
            axis.fill_between(g.mean().index, g.min().values, g.max().values, color=color, alpha=0.2)
            axis.set(xlabel="round t", title=title)
    ax.set_ylabel("generalisation gap")
    axc.set_ylabel(r"client-level gap $R_u - R_e$ (unseen − seen clients' risk)")
    ax.legend(fontsize=7)
    return save(fig, out, "gap")


def plot_libra(analyses, out: Path) -> list:
    sns.set_theme(**STYLE)
    usable = [a for a in analyses if a.libra]
    n = max(1, len(usable))
    fig, axes = plt.subplots(1, n, figsize=(6.2 * n, 5.2), squeeze=False, layout="constrained")
    fig.get_layout_engine().set(wspace=0.12)
    if not usable:
        axes[0][0].axis("off")
        axes[0][0].text(0.5, 0.5, "no run has what Libra's Corollary 1 needs\n(measured ||grad f||², estimated L and PL μ)",
                        ha="center", va="center")
    for a, ax in zip(usable, axes[0]):
        lib = a.libra
        t = np.arange(len(lib["total"]))
        ax.plot(t[1:], lib["generalisation"][1:], color="C0", label=r"generalisation $\frac{L}{2}s_t+\sqrt{s_t g_t}$")
        ax.plot(t[1:], lib["optimisation"][1:], color="C1", label=r"optimisation $C g_t$")
        ax.plot(t[1:], lib["total"][1:], color="k", lw=2, label="excess-risk bound $B^*_t$")
        ax.axvline(lib["T_star"], color="k", ls="--", lw=1, label=f"T* = {lib['T_star']} ({lib['regime']})")
        if lib["fit_degenerate"]:  # a phi on its bound: no decomposition, no T* to draw
            ax.plot(t[1:], lib["fitted"][1:], color="C2", ls=":", label="fit to test loss $- f^*$ degenerate ("
                    + ", ".join(f"$\\{k[:-1]}_{k[-1]}$ = 0" for k in lib["fit_on_bound"]) + "): no fitted T*")
        else:
            ax.plot(t[1:], lib["fitted"][1:], color="C2", ls="-.",
                    label=r"fit $\phi_1 s_t + \phi_2 g_t$ to test loss $- f^*$")
            ax.axvline(lib["T_star_fit"], color="C2", ls="-.", lw=1, label=f"fitted T* = {lib['T_star_fit']}")
        ax.set(xlabel="round t", ylabel="bound (log)", yscale="log", title=f"Libra, Corollary 1: {a.label}")
        handles, labels = ax.get_legend_handles_labels()
        if lib.get("test_loss") is not None:
            tw = ax.twinx()
            tw.plot(t, lib["test_loss"], color="C3", alpha=0.8, label="measured test loss (right axis)")
            tw.axvline(lib["test_loss_argmin"], color="C3", ls=":", lw=1,
                       label=f"test-loss minimum, t = {lib['test_loss_argmin']}")
            tw.set_ylabel("test loss", color="C3")
            tw.tick_params(axis="y", colors="C3")
            tw.grid(False)
            h2, l2 = tw.get_legend_handles_labels()
            handles, labels = handles + h2, labels + l2
        # one legend below the panel: none covers a curve
        ax.legend(handles, labels, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    return save(fig, out, "libra")


# fit-table columns and their headers (the summary-row keys are terse)
TABLE_COLUMNS = {"label": "run", "T": "T", "D_T": "$D_T$", "best_law": "best law", "sat.level": "saturating\nlevel c",
                 "sat.rho": "saturating\nrate ρ", "Gamma": "predicted\nrate Γ", "power.p": "power\nexponent p",
                 "tightest_valid": "tightest valid\nbound / measured", "T_star": "Libra T*\n(Cor. 1)",
                 "T_star_fit": "Libra T*\n(fitted)", "test_loss_argmin": "test-loss\nminimum at t"}


def plot_fit_table(rows: list, out: Path) -> list:
    sns.set_theme(**STYLE)
    cells = [[_fmt(r.get(c)) for c in TABLE_COLUMNS] for r in rows]
    units = len(rows) + 2  # the header takes two lines
    fig, ax = plt.subplots(figsize=(15, 0.3 * units + 0.2))
    ax.axis("off")
    table = ax.table(cellText=cells, colLabels=list(TABLE_COLUMNS.values()), cellLoc="center", bbox=[0, 0, 1, 1])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.auto_set_column_width(list(range(len(TABLE_COLUMNS))))
    for (row, _), cell in table.get_celld().items():
        cell.set_height((2 if row == 0 else 1) / units)
        if row == 0:
            cell.set_text_props(weight="bold")
    notes = [f"{r['label']}: {r['missing']}" for r in rows if r.get("missing")]
    if notes:
        fig.text(0.01, -0.02, "not computed:\n" + "\n".join(notes), ha="left", va="top", fontsize=7, color="0.3")
    return save(fig, out, "fit_table")


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return "–" if not np.isfinite(v) else f"{v:.4g}"
    return str(v)


def plot_all(analyses, out: Path, log: bool = False) -> list:
    """Every figure for ``analyses``; returns the written paths (``out`` not writable: one-line ConfigError)."""
    out = prepare_dir(out)
    paths = plot_discrepancy(analyses, out, log) + plot_local(analyses, out) + plot_gap(analyses, out)
    paths += plot_libra(analyses, out) + plot_fit_table([a.summary_row() for a in analyses], out)
    return paths
