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
  ``local`` (local discrepancy vs local step, if logged), and for every numeric swept axis ``vs_<axis>``:
  final discrepancy, fitted growth parameters and Libra's excess risk against the axis (error bars: std
  over seeds and pairs, over seeds for the fits).

The axis called ``seed`` is the replicate axis; every other axis defines the settings compared.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from stabkit.analysis.run_analysis import analyze  # noqa: E402
from stabkit.errors import require  # noqa: E402
from stabkit.flatness.report import flatness_report  # noqa: E402
from stabkit.flatness.runlog import final_sharpness  # noqa: E402
from stabkit.analysis.plots import STYLE, _colors, _save  # noqa: E402
from stabkit.run.runstore import atomic_write_csv, load_run  # noqa: E402
from stabkit.sweep import REPORT_FORMATS as FORMATS  # noqa: E402
from stabkit.sweep.manifest import read_manifest  # noqa: E402

REPLICATE = "seed"
BOUND_COLUMNS = ["job", "run", "algo", "bound", "quantity", "form", "source", "valid", "failed", "bound_T",
                 "measured_T", "tightness_T", "tightness_median", "holds", "undefined", "undefined_cause"]


def sweep_report(root, out=None, fmt: str = "csv", bootstrap: int = 50, plot: bool = True) -> dict:
    """Combine, analyse and plot the jobs of sweep directory ``root``; return the written paths by kind."""
    require(fmt in FORMATS, "format", fmt, f"one of {', '.join(FORMATS)}")
    root = Path(root)
    man = read_manifest(root)
    out = Path(out) if out else root / "report"
    out.mkdir(parents=True, exist_ok=True)
    axes = man["axes"]
    settings = [a for a in axes if a != REPLICATE]
    tables, rows, bound_rows, analyses = [], [], [], {}
    for job_id, rec in man["jobs"].items():
        row = {"job": job_id, **_param_cols(rec["params"]), "state": rec["state"], "error": rec.get("error")}
        path = root / "jobs" / job_id
        if (path / "metrics.csv").is_file():
            df = load_run(path)
            tables.append(df.assign(job=job_id, **_param_cols(rec["params"])))
            try:
                a = analyze(path, bootstrap=bootstrap)
            except ValueError as e:  # too short for a fit (e.g. diverged early): table row, no analysis
                row["analysis_error"] = str(e).splitlines()[0]
            else:
                analyses[job_id] = a
                row.update(_flat(a.summary_row()))
                row["excess_risk_T"] = _excess_risk_T(a)
                row["libra_bound_T"] = float(a.libra["total"][-1]) if a.libra else np.nan
                bound_rows += [{"job": job_id, **b} for b in a.bound_rows()]
            row.update(final_sharpness(path))
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
    flat = flatness_report(jobs, settings, out, plot)  # sharpness beside the discrepancy, F1-F4
    paths["figures"] = paths.get("figures", []) + flat.pop("figures", [])
    paths.update(flat)
    return paths


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
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            require(False, "format", fmt, "parquet needs pyarrow installed (pip install pyarrow); use csv")
        path = out / "metrics.parquet"
        tmp = out / ".metrics.parquet.tmp"
        df.to_parquet(tmp, index=False)
        tmp.replace(path)
        return path
    atomic_write_csv(out / "metrics.csv", df)
    return out / "metrics.csv"


def _label(params: dict, settings: list) -> str:
    return ", ".join(f"{k}={params[k]}" for k in settings) or "all"


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


def _plot_discrepancy(name, analyses, labels, out) -> list:
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    groups = _groups(labels)
    finals = []
    for (label, members), color in zip(groups.items(), _colors(len(groups))):
        curves = np.concatenate([analyses[j].curves() for j in members])  # [seeds x pairs, T + 1]
        t = np.arange(curves.shape[1])
        m, s = curves.mean(0), curves.std(0)
        ax.plot(t, m, color=color, lw=1.8, label=label)
        ax.fill_between(t, m - s, m + s, color=color, alpha=0.15)
        finals.append(m[-1])
    ax.set(xlabel="round t", ylabel=r"$\|x_t - x'_t\|$", title=f"{name}: global discrepancy (±1 std, seeds × pairs)")
    if min(finals) > 0 and max(finals) / min(finals) > 30:  # curves orders of magnitude apart: log scale
        ax.set_yscale("log")
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, out, "discrepancy")


def _plot_local(name, analyses, labels, out) -> list:
    with_local = {j: a for j, a in analyses.items() if a.local is not None and len(a.local)}
    if not with_local:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    groups = _groups({j: labels[j] for j in with_local})
    for (label, members), color in zip(groups.items(), _colors(len(groups))):
        local = pd.concat([with_local[j].local for j in members])
        for r, style in zip(sorted(local["round"].unique()), ["-", "--", ":", "-."]):
            g = local[local["round"] == r].assign(l1=lambda d: (d["l1_a"] + d["l1_b"]) / 2).groupby("k")["l1"]
            ax.plot(g.mean().index, g.mean().values, color=color, ls=style, marker="o", ms=2.5,
                    label=f"{label}, round {r}")
            ax.fill_between(g.mean().index, g.mean() - g.std(), g.mean() + g.std(), color=color, alpha=0.12)
    ax.set(xlabel="local step k", ylabel="max distance between clients (L1)",
           title=f"{name}: local discrepancy (±1 std)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _save(fig, out, "local")


PANELS = [("D_T", "final discrepancy $D_T$"), ("sat.level", "saturating fit: level c"),
          ("power.p", "power fit: exponent p"), ("excess_risk_T", "excess risk at T (measured) / Libra bound")]


def _plot_vs(name, axis, others, jobs, out) -> list:
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.8))
    groups = list(jobs.groupby(others, dropna=False)) if others else [("all", jobs)]
    for (key, g), color in zip(groups, _colors(len(groups))):
        label = _label(dict(zip(others, key if isinstance(key, tuple) else (key,))), others)
        for ax, (col, title) in zip(axes, PANELS):
            if col not in g or g[col].isna().all():
                continue
            stats = g.groupby(axis)[col].agg(["mean", "std"])
            if col == "D_T":  # std over seeds and pairs: combine within-job and between-job spread
                stats["std"] = np.sqrt(g.groupby(axis).apply(
                    lambda d: (d["D_T_std"] ** 2 + d["D_T"] ** 2).mean() - d["D_T"].mean() ** 2, include_groups=False)
                    .clip(lower=0))
            ax.errorbar(stats.index, stats["mean"], yerr=stats["std"].fillna(0), color=color, marker="o", ms=4,
                        capsize=3, label=label)
            if col == "excess_risk_T" and "libra_bound_T" in g:
                lb = g.groupby(axis)["libra_bound_T"].mean()
                ax.plot(lb.index, lb.values, color=color, ls=":", marker="x", label=f"{label} (Libra bound)")
            ax.set(xlabel=axis, title=title)
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.suptitle(f"{name}: against {axis} (mean ± std)", y=1.02)
    return _save(fig, out, f"vs_{axis.replace('.', '_')}")
