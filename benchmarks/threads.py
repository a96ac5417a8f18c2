"""The thread policy under contention: one thread, torch's default, and the policy, idle and busy.

Times rounds of a paired run (the default digits run, 8 pairs: 0.26 GFLOP per local step, above the
policy's small-op threshold) with intra-op threads fixed to 1, fixed to torch's default (one per core),
and chosen by the policy (``stabkit.engine.threads.run_threads``, which measures the idle CPUs when the run
starts), first as the machine is, then with a competing load of one busy process per CPU. Settings are
interleaved round by round so drifts in machine speed hit all alike; the median round time is reported.
Usage:

    .venv/bin/python benchmarks/threads.py [--rounds 20] [--json out.json]
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import multiprocessing
import os
import time

import numpy as np
import torch

from stabkit import RunConfig
from stabkit.engine.threads import idle_cpus, run_threads
from stabkit.run.experiment import PairedRun


def _spin():
    while True:
        pass


def measure(rounds: int, label: str) -> dict:
    default = torch.get_num_threads()
    cfg = RunConfig(rounds=rounds, constants=False)
    runs = {name: PairedRun(cfg) for name in ("one", "default", "policy")}
    runs["one"].engine.threads, runs["default"].engine.threads = 1, default
    chosen = run_threads(runs["policy"].engine.step_flops)
    runs["policy"].engine.threads = chosen
    times = {name: [] for name in runs}
    for t in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run.engine.step(t)
            times[name].append(time.perf_counter() - start)
    out = {name: float(np.median(v[1:])) * 1e3 for name, v in times.items()}
    print(f"{label:<34} policy chose {chosen} of {default} threads | round ms: one thread {out['one']:.1f}, "
          f"default {out['default']:.1f}, policy {out['policy']:.1f}  (policy / one = {out['policy'] / out['one']:.2f})")
    return {"load": label, "threads_chosen": chosen, "default_threads": default, "round_ms": out}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0))
    print(f"{cpus} CPUs, torch {torch.__version__}, {torch.get_num_threads()} default threads; "
          f"idle CPUs now: {idle_cpus(0.5):.2f}")
    rows = [measure(args.rounds, "as the machine is")]
    ctx = multiprocessing.get_context("spawn")
    load = [ctx.Process(target=_spin, daemon=True) for _ in range(cpus)]
    for p in load:
        p.start()
    try:
        time.sleep(1.0)
        rows.append(measure(args.rounds, f"+ {cpus} busy processes"))
    finally:
        for p in load:
            p.terminate()
            p.join()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
