"""Projected time of an atlas suite, printed before it starts. Per (task, perturbation, pairs), FedAvg runs
two rounds at the suite's settings (its pairs, data, model, device) with at most two local steps, and its
recorded times are scaled: training by rounds and local steps, evaluation by the number of evaluated rounds,
plus the fixed cost of a job (start-up, constants). Every other algorithm runs the same two rounds on the
cheapest of those settings: its training time over FedAvg's there scales its training everywhere (SAM-type
methods cost about twice a FedAvg round), and what its job costs beyond training and evaluation (a DP run's
accounting) is added. The jobs' sum is divided by the jobs' worth of work the workers do at once, *measured*
(``parallel_capacity``: two hyperthreads of one core are not two cores, and a shared host gives less still);
reading and analysing every job for the page (timed on the calibration jobs' files) is added whole, since the
page reads its jobs one after another. The first calibration is run twice (the process's first-use costs are
not a job's). Drawing the page is not included. A central estimate, not a bound."""
from __future__ import annotations

import concurrent.futures as cf
import io
import json
import math
import multiprocessing
import time

import pandas as pd

from stabkit.config.runconfig import RunConfig
from stabkit.run.evalbudget import evaluated_rounds
from stabkit.store.rundir import RunDir

CAL_ROUNDS, CAL_STEPS = 2, 2


def _reading_seconds(files: dict) -> float:
    """The page's cost of one job: its run directory read and analysed (``stabkit.atlas.cells``), timed on the
    calibration job's files (about as long as a 16-round job itself at CI size)."""
    import tempfile
    import time

    from stabkit.analysis.run_analysis import analyze

    with tempfile.TemporaryDirectory(prefix="stabkit-calibration-") as tmp:
        RunDir(tmp).write_files(files)
        start = time.perf_counter()
        run = RunDir(tmp)  # as the atlas reads a job: once, its analysis sharing the reading
        run.metrics()
        analyze(run, bootstrap=0)
        return time.perf_counter() - start


def projected_seconds(jobs: list, workers: int = 1) -> dict:
    """``{"total_s", "per_job": {(task, perturbation, pairs): FedAvg's seconds per job}, "algo_factor":
    {algorithm: its training time / FedAvg's}, "capacity", "parts", "reading_s"}`` for ``jobs`` (one suite's)
    on ``workers``: the jobs' compute shared by the workers, then reading every job for the page, which is
    serial. ``parts``: per job, its compute, training and fixed seconds here and what a GPU projection scales
    (:mod:`stabkit.atlas.gpuplan`: model size d, pairs, clients per round, local steps, rounds)."""
    per_job, cal, reading = {}, {}, {}
    _calibrate(jobs[0].config, "fedavg", {}) if jobs else None  # warms this process up (first-use costs)
    for job in jobs:
        key = _key(job.config)
        if key not in per_job:
            cal[key] = _calibrate(job.config, "fedavg", {})
            per_job[key] = _job_seconds(job.config, cal[key])
            reading[key] = _reading_seconds(cal[key]["files"]) if cal[key] else float("nan")
    reference = min((k for k in cal if cal[k]), key=lambda k: per_job[k], default=None)
    at = next((j.config for j in jobs if _key(j.config) == reference), None)  # where the algorithms calibrate
    costs = {}
    for job in jobs:
        algo = _algo_key(job.config)
        if algo not in costs:
            costs[algo] = _algo_cost(at, algo, cal[reference]) if reference else (1.0, 0.0)
    compute, parts = 0.0, []
    for job in jobs:
        cfg, base = job.config, cal[_key(job.config)]
        factor, extra = costs[_algo_key(cfg)]
        seconds = (per_job[_key(cfg)] + (factor - 1) * _train_seconds(cfg, base) + extra) if base else math.nan
        compute += seconds
        parts.append(_part(cfg, base, seconds, factor * _train_seconds(cfg, base) if base else math.nan))
    capacity = parallel_capacity(workers)
    serial = sum(reading[_key(job.config)] for job in jobs)
    return {"total_s": compute / capacity + serial, "per_job": per_job, "capacity": capacity,
            "algo_factor": {a: f for (a, _), (f, _) in costs.items()}, "parts": parts, "reading_s": serial}


def _part(cfg: dict, cal: dict | None, seconds: float, train_s: float) -> dict:
    """What a GPU projection needs of one job: its seconds here (all, training, fixed) and its shape."""
    written = json.loads(cal["files"].get(RunDir.CONFIG, b"{}")) if cal else {}
    run = RunConfig.from_dict(cfg)
    return {"compute_s": seconds, "train_s": train_s, "fixed_s": _fixed_seconds(cal) if cal else math.nan,
            "d": written.get("d"), "pairs": run.pairs, "clients": run.sampled_clients,
            "steps": run.local_steps, "rounds": run.rounds}


def _key(cfg: dict) -> tuple:
    return cfg["task"], cfg["perturb"], cfg["pairs"]


def _algo_key(cfg: dict) -> tuple:
    """The job's algorithm as calibrated: its name and hyperparameters (as JSON: a hashable key)."""
    return cfg["algo"], json.dumps(cfg.get("hp") or {}, sort_keys=True)


def _calibrate(cfg: dict, algo: str, hp: dict) -> dict | None:
    """The result of ``algo`` for CAL_ROUNDS rounds of at most CAL_STEPS local steps at ``cfg``'s settings
    (one thread, as every sweep job runs); None when it fails (e.g. diverges at once: no projection)."""
    from stabkit.sweep.job import execute_job

    config = dict(cfg, algo=algo, hp=hp, rounds=CAL_ROUNDS, local_steps=min(cfg["local_steps"], CAL_STEPS),
                  local_rounds=[], save_models="none", checkpoint_every=0)
    result = execute_job(RunConfig.from_dict(config).to_dict())
    return None if result["error"] else result


def _train_seconds(cfg: dict, cal: dict) -> float:
    """Training seconds of the job ``cfg`` from a calibration result: by rounds and local steps."""
    steps = min(cfg["local_steps"], CAL_STEPS)
    return cal["summary"]["time"]["train_s"] / CAL_ROUNDS * cfg["local_steps"] / steps * cfg["rounds"]


def _fixed_seconds(cal: dict) -> float:
    """What a calibration job cost beyond training and evaluation (start-up, constants, accounting)."""
    times = cal["summary"]["time"]
    return cal["wall_s"] - times["train_s"] - times["eval_s"]


def _job_seconds(cfg: dict, cal: dict | None) -> float:
    """FedAvg's seconds for the job ``cfg``: training and evaluation scaled, and the fixed cost."""
    if cal is None:
        return float("nan")
    metrics = pd.read_csv(io.BytesIO(cal["files"][RunDir.METRICS]))
    evaluated = max(int(metrics.dropna(subset=["train_loss_a"])["round"].nunique()), 1)
    evals = cal["summary"]["time"]["eval_s"] / evaluated * evaluated_rounds(cfg["rounds"], cfg.get("eval_every") or 1)
    return _train_seconds(cfg, cal) + evals + _fixed_seconds(cal)


def _algo_cost(cfg: dict, algo: tuple, fedavg: dict) -> tuple:
    """``(training time / FedAvg's, extra fixed seconds)`` of ``algo`` (name, hp as JSON), both calibrated at
    ``cfg``'s settings; FedAvg's own is (1, 0), a calibration that fails counts as FedAvg."""
    name, hp = algo
    if name == "fedavg" and hp == "{}":
        return 1.0, 0.0
    cal = _calibrate(cfg, name, json.loads(hp))
    if cal is None:
        return 1.0, 0.0
    factor = cal["summary"]["time"]["train_s"] / max(fedavg["summary"]["time"]["train_s"], 1e-9)
    return factor, max(0.0, _fixed_seconds(cal) - _fixed_seconds(fedavg))


SPIN = 5_000  # iterations of the capacity probe's workload (about half a second alone on one core)


def _spin(iterations: int) -> float:
    """Seconds a fixed single-thread workload (small matrix products) takes in this (worker) process."""
    import torch

    torch.set_num_threads(1)
    a = torch.full((96, 96), 0.01)
    start = time.perf_counter()
    for _ in range(iterations):
        a = torch.tanh(a @ a)
    return time.perf_counter() - start


def parallel_capacity(workers: int) -> float:
    """Jobs' worth of work ``workers`` one-thread worker processes do at once here, measured in a pool like the
    sweep's: ``workers`` x the time of a fixed workload in one worker alone / its longest time with all of them
    running it together (two hyperthreads of one core report as two CPUs but do not work as two; a shared host
    gives less still)."""
    if workers <= 1:
        return 1.0
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        list(pool.map(_spin, [SPIN // 10] * workers))  # every worker started, torch imported and warm
        alone = min(pool.submit(_spin, SPIN).result() for _ in range(2))
        together = list(pool.map(_spin, [SPIN] * workers))
    return min(float(workers), workers * alone / max(together))
