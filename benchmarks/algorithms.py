"""Every registered algorithm at one shared configuration: final discrepancy and cost per round.

Runs each algorithm (default hyperparameters) as a paired run on the default digits task and reports the
final ||x_T - x'_T|| (mean ± std over pairs) and the median wall time of one round relative to FedAvg,
measured in this process with the algorithms' rounds interleaved. Usage:

    .venv/bin/python benchmarks/algorithms.py [--rounds 100] [--pairs 8] [--json out.json]
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import time

import numpy as np

from stabkit import RunConfig
from stabkit.algorithms import ALGORITHMS
from stabkit.run.experiment import PairedRun


def measure(rounds: int, pairs: int, perturb: str) -> list:
    """Advance all algorithms' runs round-robin (so drifts in machine speed hit all alike)."""
    runs = {a: PairedRun(RunConfig(algo=a, rounds=rounds, pairs=pairs, perturb=perturb)) for a in ALGORITHMS}
    times = {a: [] for a in runs}
    evals = {}
    for t in range(rounds):
        for a, run in runs.items():
            start = time.perf_counter()
            evals[a] = run.engine.step(t).grad_evals
            times[a].append(time.perf_counter() - start)
    rows = []
    for a, run in runs.items():
        disc = run.engine.discrepancy()
        rows.append({"algo": a, "final_disc_mean": float(disc.mean()), "final_disc_std": float(disc.std()),
                     "final_disc_max": float(disc.max()), "round_s": float(np.median(times[a][1:])),
                     "grad_evals_per_step": evals[a]})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--perturb", default="client")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    rows = measure(args.rounds, args.pairs, args.perturb)
    base = next(r for r in rows if r["algo"] == "fedavg")["round_s"]
    print(f"digits, MLP, {args.pairs} pairs, {args.rounds} rounds, --perturb {args.perturb}, default hyperparameters")
    print(f"{'algorithm':<12} {'final disc (mean ± std)':>26} {'max':>8} {'round cost / FedAvg':>20} {'grads/step':>10}")
    for r in rows:
        r["cost_vs_fedavg"] = r["round_s"] / base
        print(f"{r['algo']:<12} {r['final_disc_mean']:>14.4g} ± {r['final_disc_std']:<9.3g} {r['final_disc_max']:>8.4g} "
              f"{r['cost_vs_fedavg']:>20.2f} {r['grad_evals_per_step']:>10g}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
