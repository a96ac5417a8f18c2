"""Cell statistics: one row per (task, perturbation, setting) of a sweep, pooled over its seeds and pairs.

A *cell* of the atlas is an algorithm on a task under a perturbation; for any sweep it is a setting (the
non-seed swept values) on a task under a perturbation. Its replicate units are the pairs of all its jobs
(seeds x pairs, independent draws). Per cell:

* ``D_T`` (mean ‖x_T − x′_T‖) with its 95% t-interval half-width (``D_T.hw``, and ``D_T.rel_hw`` = hw/mean);
* the growth law best by BIC fitted to the pooled curves, its rate (linear slope, power exponent,
  saturating ρ, exponential r), and ``D_T/D_T/2``: how much the discrepancy still grows over the second
  half of the run (2 = linear, 1 = levelled off);
* the generalisation gaps at T, ± 95% half-widths: ``gap`` = test − train loss and ``client_gap`` =
  R_u − R_e (both trajectories averaged per pair);
* test accuracy (classification) and test loss at T;
* the tightest *valid* bound on D_T (``stabkit bounds``' registered bounds whose conditions hold) ÷ the
  measured D_T, named, or "no valid bound";
* a DP cell's noise multiplier z and epsilons at delta = 1e-5 (``epsilon``: the accountant's; ``epsilon_measured``:
  the largest over its jobs of the run's measured epsilon, :mod:`stabkit.privacy`);
* ``status``: ``ok``, ``no learning`` (below the task's floor, :mod:`stabkit.atlas.floors`),
  ``diverged at round t`` (kept, never dropped) or ``failed``; ``rank`` by D_T among the ``ok`` cells of
  its table (1 = most stable).
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from stabkit.analysis.fits import TooFewPoints, fit_growth
from stabkit.analysis.run_analysis import analyze
from stabkit.atlas.floors import DEFAULT_FLOOR
from stabkit.atlas.names import setting_name
from stabkit.errors import ConfigError
from stabkit.store.rundir import RunDir
from stabkit.sweep.manifest import read_manifest

REPLICATES = ("seed", "pairs")  # replication, not setting: a cell pools every pair of every seed
TABLE_KEYS = ("task", "perturb")  # one table per task and perturbation
IDENTITY = (*TABLE_KEYS, "algo")  # what names a job's cell: in its params even where the spec's base holds it
RATE = {"linear": ("c", "slope"), "power": ("p", "exponent"), "saturating": ("rho", "rate ρ"),
        "exponential": ("r", "rate r")}


@dataclass
class JobResult:
    """What the atlas reads from one job's run directory."""

    id: str
    params: dict
    config: dict
    path: Path
    state: str
    error: str | None = None
    diverged_round: int | None = None
    curves: np.ndarray | None = None           # [pairs, T + 1] discrepancy
    final: dict = field(default_factory=dict)  # column -> [pairs] at the last round (both trajectories averaged)
    initial_train_loss: float = float("nan")
    G: float = float("nan")
    bounds: list = field(default_factory=list)  # valid bounds on D_T: (name, tightness at T)
    validation: dict = field(default_factory=dict)  # trajectory A's "acc" / "loss" on the validation split at T
    privacy: dict = field(default_factory=dict)  # a DP job's privacy.json: epsilons at delta 1e-5, its schedule


def read_jobs(root, workers: int = 1) -> list:
    """Every job of the sweep directory ``root``, with its metrics where it has any; with ``workers`` > 1 read
    by that many spawned processes (reading and analysing is ~0.2-0.3 s a job: minutes for a tuned atlas)."""
    root = Path(root)
    manifest = read_manifest(root)
    base = manifest["spec"].get("base") or {}
    fixed = {k: base[k] for k in IDENTITY if k in base}  # a suite of one algorithm has its name in the base
    items = [(job_id, {**rec, "params": {**fixed, **rec["params"]}}) for job_id, rec in manifest["jobs"].items()]
    if workers <= 1 or len(items) < 4 * workers:
        return [_read_job(root, job_id, rec) for job_id, rec in items]
    ctx = multiprocessing.get_context("spawn")  # as the sweep's pool: no fork of a process holding torch threads
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(_read_job, [root] * len(items), *zip(*items), chunksize=16))


def _read_job(root: Path, job_id: str, rec: dict) -> JobResult:
    """What the atlas takes from one job, its files read once (the analysis shares the job's RunDir)."""
    run = RunDir(root / "jobs" / job_id)
    job = JobResult(job_id, dict(rec["params"]), {}, run.path, rec["state"], rec.get("error"))
    if not run.has(RunDir.METRICS):
        return job
    df = run.metrics()
    job.config = df.attrs.get("config", {})
    if df.empty:  # only the header: a job cut off before its first round was logged, or a damaged copy
        job.error = "empty: metrics.csv holds no round, only its header"
        return job
    summary = df.attrs.get("summary") or {}
    job.diverged_round = summary.get("diverged_round")
    finite = df.groupby("round")["disc"].apply(lambda d: bool(np.isfinite(d).all()))
    last = int(finite.index[finite.to_numpy()].max())
    if job.diverged_round is not None:
        last = min(last, int(job.diverged_round) - 1)
    df = df[df["round"] <= last]
    job.curves = df.pivot(index="pair", columns="round", values="disc").to_numpy(dtype=float)
    end = df[df["round"] == last].sort_values("pair")
    for col in ("gap", "client_gap", "test_acc", "test_loss", "train_loss"):
        if f"{col}_a" in end:
            job.final[col] = ((end[f"{col}_a"] + end[f"{col}_b"]) / 2).to_numpy(dtype=float)
    for key in ("acc", "loss"):
        if f"val_{key}_a" in end:
            job.validation[key] = float(end[f"val_{key}_a"].mean())
    start = df[df["round"] == 0]
    if "train_loss_a" in start:
        job.initial_train_loss = float(start["train_loss_a"].mean())
    job.privacy = dict(run.privacy or {})
    if run.constants is not None:
        job.G = float(run.constants.get("G") or np.nan)
    if last >= 1:
        try:
            rows = analyze(run, bootstrap=0).bound_rows()
        except ConfigError:
            rows = []
        job.bounds = [(r["bound"], r["tightness_T"]) for r in rows
                      if r["valid"] and r["quantity"] == "disc" and np.isfinite(r["tightness_T"])]
    return job


def mean_ci(x) -> tuple:
    """(mean, 95% t-interval half-width, n) of the finite values of ``x``."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return float("nan"), float("nan"), 0
    if len(x) == 1:
        return float(x[0]), float("nan"), 1
    hw = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / np.sqrt(len(x))
    return float(x.mean()), float(hw), len(x)


def cell_key(job: JobResult, row_axes: list) -> tuple:
    task = job.params.get("task", job.config.get("task"))
    perturb = job.params.get("perturb", job.config.get("perturb"))
    return (task, perturb, tuple((a, job.params.get(a)) for a in row_axes))


def cell_table(jobs: list, learn_floor=None) -> pd.DataFrame:
    """One row per cell (see the module docstring). ``learn_floor(task) -> LearningFloor`` gives the learning
    floor of a task (default :data:`~stabkit.atlas.floors.DEFAULT_FLOOR` for every task)."""
    axes = list(dict.fromkeys(a for j in jobs for a in j.params if a not in (*REPLICATES, *TABLE_KEYS)))
    groups: dict = {}
    for job in jobs:
        groups.setdefault(cell_key(job, axes), []).append(job)
    rows = [_cell_row(key, members, learn_floor) for key, members in groups.items()]
    return label_rows(rank_cells(pd.DataFrame(rows)), axes)


def rank_cells(df: pd.DataFrame) -> pd.DataFrame:
    """``rank``: by D_T among the ``ok`` cells of each table (1 = most stable; the others NaN)."""
    if "D_T" not in df:  # no cell has metrics (every job failed before its first round): the page lists them
        df = df.assign(D_T=np.nan)
    df = df.assign(rank=np.nan)
    for _, idx in df.groupby(["task", "perturb"]).groups.items():
        ok = df.loc[idx][df.loc[idx, "status"] == "ok"]
        df.loc[ok.index, "rank"] = ok["D_T"].rank(method="min")
    return df


def label_rows(df: pd.DataFrame, axes: list) -> pd.DataFrame:
    """``name``: the values of ``axes`` that tell a table's rows apart (the algorithm's title alone in the
    atlas)."""
    names = []
    for _, row in df.iterrows():
        table = df[(df["task"] == row["task"]) & (df["perturb"] == row["perturb"])]
        varying = [a for a in axes if a != "algo" and table[f"param.{a}"].astype(str).nunique() > 1]
        names.append(setting_name({"algo": row["algo"], **{a: row[f"param.{a}"] for a in varying}}))
    return df.assign(name=names)


def _cell_row(key, members: list, learn_floor) -> dict:
    task, perturb, setting = key
    row = {"task": task, "perturb": perturb, **{f"param.{a}": v for a, v in setting},
           "algo": members[0].config.get("algo", members[0].params.get("algo")), "jobs": [j.id for j in members],
           "job_dirs": [j.path for j in members], "seeds": len(members)}
    with_metrics = [j for j in members if j.curves is not None]
    diverged = [j.diverged_round for j in members if j.diverged_round is not None]
    failed = [j for j in members if j.curves is None or j.state == "failed" and j.diverged_round is None]
    if failed:
        row["status"] = f"failed: {failed[0].error or failed[0].state}"
    elif diverged:
        row["status"] = f"diverged at round {min(diverged)}"
        row["diverged_round"] = min(diverged)
    if not with_metrics:
        return row
    T = min(j.curves.shape[1] for j in with_metrics) - 1
    curves = np.concatenate([j.curves[:, :T + 1] for j in with_metrics])
    row["T"], row["units"], row["curve"] = T, curves.shape[0], curves.mean(0)
    row["D_T"], row["D_T.hw"], _ = mean_ci(curves[:, -1])
    row["D_T.rel_hw"] = row["D_T.hw"] / row["D_T"] if row["D_T"] > 0 else float("nan")
    half = curves[:, T // 2].mean()
    row["D_T/D_T/2"] = float(curves[:, -1].mean() / half) if T >= 2 and half > 0 else float("nan")
    row.update(_growth(curves))
    for col in ("gap", "client_gap", "test_acc", "test_loss", "train_loss"):
        values = np.concatenate([j.final[col] for j in with_metrics if col in j.final] or [np.zeros(0)])
        row[col], row[f"{col}.hw"], _ = mean_ci(values)
    row["initial_train_loss"] = float(np.nanmean([j.initial_train_loss for j in with_metrics]))
    row["G"] = float(np.nanmax([j.G for j in with_metrics])) if any(np.isfinite(j.G) for j in with_metrics) else np.nan
    row.update(_tightest(with_metrics))
    row.update(_privacy(with_metrics))
    row.setdefault("status", _learning_status(row, learn_floor))
    return row


def _growth(curves: np.ndarray) -> dict:
    try:
        fit = fit_growth(np.arange(curves.shape[1]), curves, bootstrap=0)
    except TooFewPoints:
        return {"law": None, "rate": float("nan"), "rate_name": ""}
    name, what = RATE[fit.best]
    return {"law": fit.best, "rate": float(fit.fits[fit.best].params[name]), "rate_name": what}


def _tightest(jobs: list) -> dict:
    """The valid bound with the smallest median (over seeds) bound/measured at T, or none."""
    by_name: dict = {}
    for j in jobs:
        for name, t in j.bounds:
            by_name.setdefault(name, []).append(t)
    if not by_name:
        return {"bound": "no valid bound", "bound/measured": float("nan")}
    name = min(by_name, key=lambda n: np.median(by_name[n]))
    return {"bound": name, "bound/measured": float(np.median(by_name[name]))}


def _privacy(jobs: list) -> dict:
    """A DP cell's noise multiplier and epsilons at delta 1e-5: the accountant's (the same schedule in every
    job) and the largest measured one over its jobs; nothing for a cell without DP."""
    records = [j.privacy for j in jobs if j.privacy]
    if not records:
        return {}
    return {"noise_multiplier": float(records[0]["schedule"]["noise_multiplier"]),
            "epsilon": max(float(r["epsilon_accountant"]) for r in records),
            "epsilon_measured": max(float(r["epsilon_measured"]) for r in records)}


def _learning_status(row: dict, learn_floor) -> str:
    """``ok`` or why the cell's model does not learn (:class:`~stabkit.atlas.floors.LearningFloor`)."""
    floor = learn_floor(row["task"]) if learn_floor else DEFAULT_FLOOR
    return floor.status(row.get("test_acc", np.nan), row.get("initial_train_loss", np.nan),
                        row.get("train_loss", np.nan))
