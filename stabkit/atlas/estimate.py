"""Projected time of an atlas suite, printed before it starts. Per (task, perturbation, pairs), FedAvg runs
two rounds at the suite's settings (its pairs, data, model, device) with at most two local steps, and its
recorded times are scaled: training by rounds and local steps, evaluation by the number of evaluated rounds,
plus the fixed cost of a job (start-up, constants) and of reading and analysing it for the page (timed on the
calibration job's files). Drawing the page's figures is not included. SAM-type algorithms cost about twice a FedAvg round and
the other algorithms 1.0-1.3x (README, Algorithms), so this is a central estimate, not a bound."""
from __future__ import annotations

import io

import pandas as pd

from stabkit.config.runconfig import RunConfig
from stabkit.run.evalbudget import evaluated_rounds

CAL_ROUNDS, CAL_STEPS = 2, 2


def _reading_seconds(files: dict) -> float:
    """The page's cost of one job: its run directory read and analysed (``stabkit.atlas.cells``), timed on the
    calibration job's files (about as long as a 16-round job itself at CI size)."""
    import tempfile
    import time
    from pathlib import Path

    from stabkit.analysis.run_analysis import analyze
    from stabkit.store.runstore import load_run

    with tempfile.TemporaryDirectory(prefix="stabkit-calibration-") as tmp:
        for name, data in files.items():
            (Path(tmp) / name).write_bytes(data)
        start = time.perf_counter()
        load_run(tmp)
        analyze(tmp, bootstrap=0)
        return time.perf_counter() - start


def projected_seconds(jobs: list, workers: int = 1) -> dict:
    """``{"total_s", "per_job": {(task, perturbation, pairs): seconds per job}}`` for ``jobs`` (one suite's)."""
    from stabkit.sweep.job import execute_job  # one thread, as every sweep job runs

    per_job, total = {}, 0.0
    for job in jobs:
        cfg = job.config
        key = (cfg["task"], cfg["perturb"], cfg["pairs"])
        if key not in per_job:
            cal = dict(cfg, algo="fedavg", hp={}, rounds=CAL_ROUNDS, local_steps=min(cfg["local_steps"], CAL_STEPS),
                       local_rounds=[], save_models="none", checkpoint_every=0)
            result = execute_job(RunConfig.from_dict(cal).to_dict())
            if result["error"]:  # e.g. a setting that diverges at once: no projection for it
                per_job[key] = float("nan")
                continue
            times = result["summary"]["time"]
            metrics = pd.read_csv(io.BytesIO(result["files"]["metrics.csv"]))
            evaluated = max(int(metrics.dropna(subset=["train_loss_a"])["round"].nunique()), 1)
            train = times["train_s"] / CAL_ROUNDS * cfg["local_steps"] / cal["local_steps"] * cfg["rounds"]
            evals = times["eval_s"] / evaluated * evaluated_rounds(cfg["rounds"], cfg.get("eval_every") or 1)
            fixed = result["wall_s"] - times["train_s"] - times["eval_s"]
            per_job[key] = train + evals + fixed + _reading_seconds(result["files"])
        total += per_job[key]
    return {"total_s": total / max(workers, 1), "per_job": per_job}
