"""What driving Flower costs: ``flwr:FedAvg`` against stabkit's native ``fedavg`` per round, on W1
(Synthetic(1,1) logistic) and W2 (LeNet-5) at 8 pairs (``benchmarks/workloads.py``); and (``--only APP``) the
whole-app path (``--flwr-app``, one pair) on the example app ``examples/flower_digits`` against a plain loop
that calls the same ClientApp once per sampled node (one trajectory, no seeding), as a simulation would.

Both runs see the same configuration; their rounds are interleaved (so drifts in machine speed hit both alike)
and timed on the engine's round alone (no evaluation), on one thread. The ratio of the medians is the bridge's
overhead: per pair and trajectory one ``configure_train``, s replies serialised into Flower's ArrayRecords,
one ``aggregate_train`` in numpy, and the copies between torch and numpy. Usage:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/flower_overhead.py [--only W1,W2,APP] [--rounds 20] [--json out.json]
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
from stabkit.run.experiment import PairedRun  # noqa: E402

ALGOS = ("fedavg", "flwr:FedAvg")


def measure(workload, pairs: int, rounds: int) -> dict:
    """Median seconds per round of each algorithm of :data:`ALGOS` on ``workload`` (first round dropped)."""
    task = workload.task()
    runs = {a: PairedRun(workload.config(pairs).replace(algo=a, rounds=rounds + 1), task=task) for a in ALGOS}
    times = {a: [] for a in ALGOS}
    for t in range(rounds + 1):
        for a, run in runs.items():
            start = time.perf_counter()
            run.engine.step(t)
            times[a].append(time.perf_counter() - start)
    med = {a: float(np.median(v[1:])) for a, v in times.items()}
    return {"workload": workload.name, "description": workload.description, "pairs": pairs, "rounds": rounds,
            **{f"{a}_round_s": s for a, s in med.items()}, "ratio": med["flwr:FedAvg"] / med["fedavg"]}


def measure_app(rounds: int, s: int = 5) -> dict:
    """Median seconds per round: the paired app path (1 pair: 2 x s ClientApp calls) and the plain loop (s calls)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples" / "flower_digits"))
    from stabkit import RunConfig
    from stabkit.algorithms.flower import inprocess as fl
    from stabkit.run import flwr_clients as fc
    from stabkit.run.flwr_app import AppRun, load_app

    app = load_app("app:stabkit_app")
    paired = AppRun("app:stabkit_app", app, RunConfig(pairs=1, rounds=rounds + 1, clients_per_round=s))
    plain = AppRun("app:stabkit_app", app, RunConfig(pairs=1, rounds=rounds + 1, clients_per_round=s))
    strategy, contexts = plain.strategies[0, 0], {}

    def plain_round(t):
        with fl.flower_calls(t, 0):
            messages = fl.configure(strategy, t + 1, plain.arrays[0, 0], np.arange(s) + (t % 2) * s + fl.NODE_OFFSET)
        replies = []
        for m in messages:
            node = m.metadata.dst_node_id - fl.NODE_OFFSET
            context = contexts.setdefault(node, fc.node_context(node + fl.NODE_OFFSET, node, plain.N))
            replies.append(app["client_app"](m, context))
        arrays, _ = strategy.aggregate_train(t + 1, replies)
        plain.arrays[0, 0] = {k: a.numpy() for k, a in arrays.items()}

    times = {"paired": [], "plain": []}
    for t in range(rounds + 1):
        for name, step in (("paired", paired.step), ("plain", plain_round)):
            start = time.perf_counter()
            step(t)
            times[name].append(time.perf_counter() - start)
    med = {a: float(np.median(v[1:])) for a, v in times.items()}
    return {"workload": "APP", "description": f"examples/flower_digits, 1 pair, s={s}", "rounds": rounds,
            **{f"{a}_round_s": v for a, v in med.items()}, "ratio": med["paired"] / med["plain"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="W1,W2")
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=None, help="timed rounds (default: W1 20, W2 5)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    known = workloads()
    rows = []
    for name in args.only.split(","):
        rounds = args.rounds or {"W1": 20, "W2": 5, "APP": 10}.get(name, 5)
        if name == "APP":
            row = measure_app(rounds)
            rows.append(row)
            print(f"APP ({row['description']}), median of {rounds} rounds: paired "
                  f"{row['paired_round_s'] * 1e3:.0f} ms, "
                  f"plain loop {row['plain_round_s'] * 1e3:.0f} ms, ratio {row['ratio']:.2f}x", flush=True)
            continue
        row = measure(known[name], args.pairs, rounds)
        rows.append(row)
        print(f"{name} ({row['description']}), {args.pairs} pairs, median of {rounds} rounds: fedavg "
              f"{row['fedavg_round_s'] * 1e3:.1f} ms, flwr:FedAvg {row['flwr:FedAvg_round_s'] * 1e3:.1f} ms, "
              f"ratio {row['ratio']:.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
