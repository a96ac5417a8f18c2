"""Seconds per pair-round of one workload at one thread, in one batch and in chunks of pairs (issue 23: the
atlas's top-up jobs of 150-250 digits pairs cost twice as much per pair as its 32-pair jobs).

    .venv/bin/python benchmarks/chunks.py [--workload W3] [--pairs 245] [--chunk-mib 4096,32,16,8,4] [--rounds 3]

``--chunk-mib`` values are ``stabkit.engine.paired.CHUNK_BYTES`` in MiB (4096: one batch, as before chunking).
Prints ms per round and per pair-round and the minor page faults per round (``getrusage``): the cliff is
glibc serving every tensor above its largest mmap threshold (32 MiB) with a fresh mmap. Results behind the
engine's choice (8 MiB), one thread: digits MLP at 245 pairs, one batch 3.5-5.5 ms per pair-round and
130,000-310,000 faults per round, chunks of 8-16 MiB 2.1-2.5 ms and none; ``--workload W2 --pairs 8``
(LeNet-5) 1140-1395 ms per round in one batch, 962-1099 ms in chunks of 2 pairs.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import stabkit.engine.paired as paired  # noqa: E402
from benchmarks.workloads import workloads  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="W3")
    ap.add_argument("--pairs", type=int, default=245)
    ap.add_argument("--chunk-mib", default="4096,32,16,8,4")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    w = workloads(1.0, "cpu")[args.workload]
    run = PairedRun(w.config(args.pairs), task=w.task())
    run.engine.threads = 1
    set_deterministic()  # as PairedRun.run does
    saved = paired.CHUNK_BYTES
    try:
        for mib in (int(v) for v in args.chunk_mib.split(",")):
            paired.CHUNK_BYTES = mib << 20
            run.engine.step(0)  # warm-up at this chunk size
            faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            for t in range(1, args.rounds + 1):
                run.engine.step(t)
            dt = (time.perf_counter() - start) / args.rounds
            faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / args.rounds
            print(f"{args.workload}, {args.pairs} pairs, chunks of {mib} MiB ({run.engine.pairs_per_chunk()} "
                  f"pairs): {dt * 1e3:.0f} ms per round, {dt / args.pairs * 1e3:.2f} ms per pair-round, "
                  f"{faults:.0f} page faults per round", flush=True)
    finally:
        paired.CHUNK_BYTES = saved


if __name__ == "__main__":
    main()
