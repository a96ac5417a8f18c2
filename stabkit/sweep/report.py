"""``sweep_report``: one tidy table of all jobs of a sweep, the bounds analysis of each, comparison figures.

Writes to ``DIR/report/`` (or ``out``):

* ``metrics.csv`` (or ``.parquet``): every job's ``metrics.csv`` rows with the job id and its swept values
  as columns — one tidy table;
* ``jobs.csv``: one row per job: swept values, state, error, and ``stabkit bounds``' summary row (D_T,
  growth-law fits, predicted rates, Libra's T*, excess risk at T);
* ``bounds.csv``: every instantiated bound of every job (validity, tightness, holds);
* with sharpness measured (``sharpness_rounds``): ``sharp_*`` columns in ``jobs.csv`` (last measured round,
  mean over pairs and trajectories), ``flatness.csv``, ``flatness_claims.csv`` (FedSWA paper F1-F4) and the
  ``sharpness_vs_discrepancy`` figure (:mod:`stabkit.flatness.report`);
* figures (PNG + PDF): ``discrepancy`` (D_t per setting, mean over seeds and pairs, band ±1 std),
  ``local`` (local discrepancy vs local step, if logged; a curve equal to another, e.g. every setting at
  round 0, is drawn as open markers labelled ``= <that one>``), and for every numeric swept axis
  ``vs_<axis>``: final discrepancy, fitted growth parameters (the saturating level only where that law is
  best) and Libra's excess risk against the axis (error bars: std over seeds and pairs, over seeds for the
  fits). Legends read ``axis=value`` with ``default`` for an unset value; each setting has its own colour and
  marker (``stabkit.plotting.line_styles``).

The axis called ``seed`` is the replicate axis; every other axis defines the settings compared.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from stabkit.analysis.labels import value_text
from stabkit.analysis.run_analysis import analyze
from stabkit.errors import ConfigError, require
from stabkit.extras import require_extra
from stabkit.flatness.report import flatness_report
from stabkit.flatness.runlog import final_sharpness
from stabkit.plotting import STYLE, coincident, line_styles, plt, save, sns
from stabkit.store.atomic import atomic_write_csv
from stabkit.store.outdir import output_dir
from stabkit.store.rundir import RunDir
from stabkit.sweep import REPORT_FORMATS as FORMATS
from stabkit.sweep.manifest import read_manifest

REPLICATE = "seed"
TABLE = "metrics"  # the report's one tidy table, TABLE.csv or TABLE.parquet (a report's file, not a run's)
BOUND_COLUMNS = ["job", "run", "algo", "bound", "quantity", "form", "source", "valid", "failed", "bound_T",
                 "measured_T", "tightness_T", "tightness_median", "holds", "undefined", "undefined_cause"]


def sweep_report(root, out=None, fmt: str = "csv", bootstrap: int = 50, plot: bool = True) -> dict:
    """Combine, analyse and plot the jobs of sweep directory ``root``; return the written paths by kind, and
    under ``missing`` the jobs that lack a part (job -> {part: reason}, e.g. a growth fit of a 2-round run).
    Every job with metrics is in every figure, whatever it lacks."""
    require(fmt in FORMATS, "format", fmt, f"one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        require_extra("parquet")  # before anything is read or written
    root = Path(root)
    man = read_manifest(root)
    with output_dir(Path(out) if out else root / "report") as out:  # a refusal below leaves no empty folder
        return _report(root, man, out, fmt, bootstrap, plot)


def _report(root: Path, man: dict, out: Path, fmt: str, bootstrap: int, plot: bool) -> dict:
    axes = man["axes"]
    settings = [a for a in axes if a != REPLICATE]
    tables, rows, bound_rows, analyses, missing = [], [], [], {}, {}
    for job_id, rec in man["jobs"].items():
        row = {"job": job_id, **_param_cols(rec["params"]), "state": rec["state"], "error": rec.get("error")}
        run = RunDir(root / "jobs" / job_id)
        if not run.has(RunDir.METRICS):
            missing[job_id] = {"metrics": f"no metrics ({rec['state']}{': ' + rec['error'] if rec.get('error') else ''})"}
        else:
            table, a = _analyse_job(run, job_id, bootstrap, row, missing)
            if a is not None:
                tables.append(table.assign(job=job_id, **_param_cols(rec["params"])))
                analyses[job_id] = a
                bound_rows += [{"job": job_id, **b} for b in a.bound_rows()]
            row.update(final_sharpness(run))
        rows.append(row)
    require(bool(tables), "sweep", str(root), "no job has metrics yet (run `stabkit sweep` first)")
    paths = {"table": _write_table(pd.concat(tables, ignore_index=True), out, fmt)}
    jobs = pd.DataFrame(rows)
    atomic_write_csv(out / "jobs.csv", jobs)
    atomic_write_csv(out / "bounds.csv", pd.DataFrame(bound_rows, columns=BOUND_COLUMNS) if not bound_rows
                     else pd.DataFrame(bound_rows))
    paths["jobs"], paths["bounds"] = out / "jobs.csv", out / "bounds.csv"
    if plot:
        paths["figures"] = draw_figures(man["spec"].get("name", "sweep"), settings, jobs, analyses, out)
    paths["missing"] = missing
    flat = flatness_report(jobs, settings, out, plot)  # sharpness beside the discrepancy, F1-F4
    paths["figures"] = paths.get("figures", []) + flat.pop("figures", [])
    paths.update(flat)
    return paths


def _analyse_job(run: RunDir, job_id: str, bootstrap: int, row: dict, missing: dict) -> tuple:
    """``(metrics, Analysis)`` of one job's run directory (read once), its results added to its ``row`` and what
    it lacks to ``missing``; a damaged run directory gives ``(None, None)`` and a row saying so."""
    try:
        df = run.metrics()
        a = analyze(run, bootstrap=bootstrap)
    except ConfigError as e:  # a damaged run directory: a table row saying so, no analysis
        row["analysis_error"] = missing.setdefault(job_id, {})["analysis"] = str(e)
        return None, None
    row.update(_flat(a.summary_row()))
    row["excess_risk_T"] = _excess_risk_T(a)
    row["libra_bound_T"] = float(a.libra["total"][-1]) if a.libra else np.nan
    if a.missing:
        missing[job_id] = dict(a.missing)
    return df, a


def _param_cols(params: dict) -> dict:
    return {k: (str(v) if isinstance(v, (dict, list)) else v) for k, v in params.items()}


def _flat(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, tuple):
            out[f"{k}.lo"], out[f"{k}.hi"] = v
        elif k not in ("run",):
            out[k] = v
    return out


def _excess_risk_T(a) -> float:
    f_star = a.setting.constants.get("f_star")
    test = a.setting.measured.get("test_loss")
    if f_star is None or test is None:
        return np.nan
    return float(test[-1] - f_star)


def _write_table(df: pd.DataFrame, out: Path, fmt: str) -> Path:
    if fmt == "parquet":
        path = out / f"{TABLE}.parquet"
        tmp = out / f".{TABLE}.parquet.tmp"
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        return path
    atomic_write_csv(out / f"{TABLE}.csv", df)
    return out / f"{TABLE}.csv"


def _label(params: dict, settings: list) -> str:
    """``axis=value, ...``; an unset value (None, or NaN in a table) reads "default"."""
    return ", ".join(f"{k}={value_text(params[k])}" for k in settings) or "all"


def draw_figures(name: str, settings: list, jobs: pd.DataFrame, analyses: dict, out: Path) -> list:
    """The comparison figures of a sweep (see the module docstring)."""
    sns.set_theme(**STYLE)
    done = {j: a for j, a in analyses.items()}
    labels = {j: _label(jobs.set_index("job").loc[j].to_dict(), settings) for j in done}
    paths = _plot_discrepancy(name, done, labels, out) + _plot_local(name, done, labels, out)
    numeric = [k for k in settings if pd.api.types.is_numeric_dtype(jobs[k].dropna()) and jobs[k].nunique() > 1]
    for axis in numeric:
        paths += _plot_vs(name, axis, [k for k in settings if k != axis], jobs[jobs["job"].isin(done)], out)
    return [p for p in paths if p.suffix == ".png"]


def _groups(labels: dict) -> dict:
    groups = {}
    for job, label in labels.items():
        groups.setdefault(label, []).append(job)
    return groups


def _padded(curves: list) -> np.ndarray:
    """Curves of different lengths (a job stopped early) stacked as [n, longest], NaN after each one's end."""
    width = max(c.shape[1] for c in curves)
    return np.concatenate([np.pad(c, ((0, 0), (0, width - c.shape[1])), constant_values=np.nan) for c in curves])


def _plot_discrepancy(name, analyses, labels, out) -> list:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    groups = _groups(labels)
    stats = {}
    for label, members in groups.items():
        curves = _padded([analyses[j].curves() for j in members])  # [seeds x pairs, T + 1]
        with np.errstate(invalid="ignore"):
            stats[label] = (np.nanmean(curves, 0), np.nanstd(curves, 0))
    finals = [m[np.isfinite(m)][-1] for m, _ in stats.values()]
    log = min(finals) > 0 and max(finals) / min(finals) > 30  # curves orders of magnitude apart: log scale
    first = 1 if log else 0  # D_0 = 0 has no place on a log axis
    for (label, (m, s)), style in zip(stats.items(), line_styles(len(stats), markevery=0.1)):
        t = np.arange(len(m))[first:]
        ax.plot(t, m[first:], lw=1.8, ms=4, label=label, **style)
        ax.fill_between(t, (m - s)[first:], (m + s)[first:], color=style["color"], alpha=0.15)
    ax.set(xlabel="round t", ylabel=r"$\|x_t - x'_t\|$", title=f"{name}: global discrepancy (±1 std, seeds × pairs)")
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1), handlelength=3)
    return save(fig, out, "discrepancy")


def _plot_local(name, analyses, labels, out) -> list:
    with_local = {j: a for j, a in analyses.items() if a.local is not None and len(a.local)}
    if not with_local:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    groups = _groups({j: labels[j] for j in with_local})
    curves = []  # (label, style of the setting, line style of the round, k, mean, std)
    for (label, members), style in zip(groups.items(), line_styles(len(groups))):
        local = pd.concat([with_local[j].local for j in members])
        for r, ls in zip(sorted(local["round"].unique()), ["-", "--", ":", "-."]):
            g = local[local["round"] == r].assign(l1=lambda d: (d["l1_a"] + d["l1_b"]) / 2).groupby("k")["l1"]
            curves.append((f"{label}, round {r}", style, ls, g.mean().index.to_numpy(), g.mean().to_numpy(),
                           g.std().to_numpy()))
    same = coincident([np.concatenate([k, m]) for _, _, _, k, m, _ in curves])
    for (label, style, ls, k, m, sd), twin in zip(curves, same):
        color = style["color"]
        if twin is not None:  # equal to a curve drawn before (e.g. every setting at round 0): open markers on it
            ax.plot(k, m, color=color, ls="none", marker=style["marker"], mfc="none", ms=6,
                    label=f"{label} = {curves[twin][0]}")
            continue
        ax.plot(k, m, color=color, ls=ls, marker=style["marker"], ms=3, label=label)
        ax.fill_between(k, m - sd, m + sd, color=color, alpha=0.12)
    ax.set(xlabel="local step k", ylabel="max distance between clients (L1)",
           title=f"{name}: local discrepancy (±1 std)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))
    return save(fig, out, "local")


PANELS = [("D_T", "final discrepancy $D_T$"),
          ("sat.level", "saturating level c (where best by BIC)"),
          ("power.p", "power fit: exponent p"), ("excess_risk_T", "excess risk at T (measured) / Libra bound")]


def _plot_vs(name, axis, others, jobs, out) -> list:
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.8))
    # a saturating level fitted to a curve that does not level off (rho -> 0) is meaningless: left out
    jobs = jobs.assign(**{"sat.level": jobs["sat.level"].where(jobs["best_law"] == "saturating")}) \
        if {"sat.level", "best_law"} <= set(jobs) else jobs
    groups = list(jobs.groupby(others, dropna=False)) if others else [("all", jobs)]
    for ax, (col, title) in zip(axes, PANELS):
        ax.set(xlabel=axis, title=title)
        if col not in jobs or jobs[col].isna().all():
            ax.text(0.5, 0.5, "no job has this value", ha="center", va="center", transform=ax.transAxes, color="0.4")
    for (key, g), style in zip(groups, line_styles(len(groups))):
        color, marker = style["color"], style["marker"]
        label = _label(dict(zip(others, key if isinstance(key, tuple) else (key,))), others) if others else ""
        for ax, (col, title) in zip(axes, PANELS):
            if col not in g or g[col].isna().all():
                continue
            stats = g.groupby(axis)[col].agg(["mean", "std"])
            if col == "D_T":  # std over seeds and pairs: combine within-job and between-job spread
                stats["std"] = np.sqrt(g.groupby(axis).apply(
                    lambda d: (d["D_T_std"] ** 2 + d["D_T"] ** 2).mean() - d["D_T"].mean() ** 2, include_groups=False)
                    .clip(lower=0))
            measured = f"{label} measured" if col == "excess_risk_T" else label
            ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0), color=color, marker=marker, ms=4,
                        capsize=3, label=measured.strip() or None)
            if col == "excess_risk_T" and "libra_bound_T" in g:
                lb = g.groupby(axis)["libra_bound_T"].mean()
                ax.plot(lb.index, lb.values, color=color, ls=":", marker="x", label=f"{label} Libra bound".strip())
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.suptitle(f"{name}: against {axis} (mean ± std)", y=1.02)
    return save(fig, out, f"vs_{axis.replace('.', '_')}")
