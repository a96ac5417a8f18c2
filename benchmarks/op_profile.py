"""Where a workload's round time goes: torch.profiler's op table for a few rounds of one workload.

    .venv/bin/python benchmarks/op_profile.py W2 [--pairs 8] [--rounds 2] [--threads 1] [--device cpu] [--rows 15]

The profiles behind the engine's fast paths came from this script: on W2 (LeNet-5, 8 pairs) the
torch.func path spent its time in ``convolution_backward`` and in max-pool forwards recomputed inside
``vmap``'s backward, and ``y - lr * g`` cost two passes over [160, 44426] floats per local step; on W1
(logistic regression, 8 pairs, one thread) a quarter of the round was ``log_softmax`` over 10 classes (a
slow CPU kernel in torch 2.13), which the written-out softmax - one-hot gradient replaced; see docs/performance.md
for what each fix bought. Runs at one intra-op thread by default (``--threads``), the setting the ratios of
docs/performance.md are measured at.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.workloads import workloads  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402


def profile_workload(name: str, pairs: int, rounds: int, device: str, rows: int, threads: int = 1) -> str:
    """The op table (self time, descending) of ``rounds`` rounds of workload ``name`` at ``threads`` intra-op
    threads, plus one evaluation where the benchmark times evaluation."""
    w = workloads(1.0, device)[name]
    torch.set_num_threads(threads)
    run = PairedRun(w.config(pairs), task=w.task())
    run.engine.threads = threads
    set_deterministic()  # as PairedRun.run does
    rec = run.engine.step(0)  # warm-up
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as prof:
        for t in range(1, rounds + 1):
            rec = run.engine.step(t)
        if w.evaluate:  # as the benchmark times it (W2, W4, W5 time training alone)
            run.evaluator.evaluate(run.engine.x, rec.rows)
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=["W1", "W2", "W3", "W4", "W5"])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads")
    args = ap.parse_args(argv)
    print(profile_workload(args.workload, args.pairs, args.rounds, args.device, args.rows, args.threads))


if __name__ == "__main__":
    main()
