"""What privacy costs: measuring the per-instance sensitivity (``dp_sensitivity``) against a plain DP-FedAvg run
on W1 and W2, DP-FedAvg against FedAvg (clipping and counter-based noise), and 10^4 audit trials of one round
on the quadratic.

    .venv/bin/python benchmarks/privacy_overhead.py [--workloads W1,W2] [--pairs 8] [--reps 3] [--trials 10000]

Each configuration is timed over the workload's rounds at one thread, the three variants alternating within each
repetition (median over repetitions reported); the measurement must cost at most 1.3x a plain DP-FedAvg run (issue
34). The audit is timed end to end (building the 10^4-pair run, the noisy and the noiseless references, the
threshold test) and must take under a minute on 2 cores. Writes ``benchmarks/results_privacy.json`` (a run of
some workloads replaces theirs and keeps the others').
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.workloads import workloads  # noqa: E402
from stabkit import RunConfig  # noqa: E402
from stabkit.config.taskoptions import TaskOptions  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.run.audit import run_audit  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402

DP = {"clip": 1.0, "noise_multiplier": 1.0}


def seconds_per_round(run: PairedRun, rounds: int) -> float:
    run.engine.step(0)  # warm-up
    start = time.perf_counter()
    for t in range(1, rounds + 1):
        run.engine.step(t)
    return (time.perf_counter() - start) / rounds


def workload_overhead(name: str, pairs: int, reps: int) -> dict:
    w = workloads(1.0, "cpu")[name]
    task = w.task()
    runs = {"fedavg": PairedRun(w.config(pairs), task=task),
            "dp_fedavg": PairedRun(w.config(pairs).replace(algo="dp_fedavg", hp=DP), task=task),
            "dp_fedavg+measured": PairedRun(w.config(pairs).replace(algo="dp_fedavg", hp=DP), task=task)}
    runs["dp_fedavg"].engine.measure_sensitivity = False
    times = {k: [] for k in runs}
    for _ in range(reps):
        for key, run in runs.items():
            run.engine.threads = 1
            times[key].append(seconds_per_round(run, w.rounds))
    med = {k: float(np.median(v)) for k, v in times.items()}
    out = {"workload": w.description, "pairs": pairs, "rounds": w.rounds, "s_per_round": med, "all": times,
           "measured_over_dp": med["dp_fedavg+measured"] / med["dp_fedavg"],
           "dp_over_fedavg": med["dp_fedavg"] / med["fedavg"]}
    print(f"{name}: FedAvg {med['fedavg'] * 1e3:.1f} ms, DP-FedAvg {med['dp_fedavg'] * 1e3:.1f} ms "
          f"({out['dp_over_fedavg']:.2f}x), with dp_sensitivity {med['dp_fedavg+measured'] * 1e3:.1f} ms "
          f"({out['measured_over_dp']:.2f}x DP-FedAvg) per round, {pairs} pairs", flush=True)
    return out


def audit_time(trials: int) -> dict:
    cfg = RunConfig(algo="dp_fedavg", hp={"clip": 0.1, "noise_multiplier": 1.0}, task="quadratic", rounds=1,
                    clients_per_round=10, task_options=TaskOptions(clients=10, heldout_clients=4),
                    perturb="client", client_mode="population", local_steps=5, batch_size=8)
    start = time.perf_counter()
    record = run_audit(cfg, trials, 1e-5)
    seconds = time.perf_counter() - start
    print(f"audit: {trials} trials of one round on the quadratic in {seconds:.1f} s at {torch.get_num_threads()} "
          f"threads (epsilon_lower {record['epsilon_lower']:.3g}, accountant {record['epsilon_accountant']:.3g})",
          flush=True)
    return {"trials": trials, "seconds": seconds, "threads": torch.get_num_threads(),
            "epsilon_lower": record["epsilon_lower"], "epsilon_accountant": record["epsilon_accountant"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workloads", default="W1,W2")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trials", type=int, default=10000)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results_privacy.json"))
    args = ap.parse_args(argv)
    set_deterministic()  # as PairedRun.run does
    torch.set_num_threads(1)
    results = {name: workload_overhead(name, args.pairs, args.reps) for name in args.workloads.split(",")}
    torch.set_num_threads(2)
    results["audit"] = audit_time(args.trials)
    out = Path(args.out)
    kept = json.loads(out.read_text()) if out.is_file() else {}  # the workloads not run this time stay as they were
    out.write_text(json.dumps({**kept, **results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
