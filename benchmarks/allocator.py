"""stabkit's allocator policy (``stabkit.engine.alloc``: glibc's heap, no mmap, freed memory kept) against
the alternatives: glibc's defaults for large blocks, jemalloc and tcmalloc (issue 36).

    .venv/bin/python benchmarks/allocator.py [--reps 3] [--w5-rounds 3] [--digits-rounds 4] [--json PATH]

Every trial is a fresh process running one workload under one policy, so that ``LD_PRELOAD`` and the
allocator's state start clean; the policies alternate within each repetition (their order rotates from one
repetition to the next), so a load from the machine's other users falls on every policy alike. Policies:

* ``stabkit``: the default: glibc serves every block from its heap (``mallopt(M_MMAP_MAX, 0)``) and keeps
  freed memory for reuse, ``malloc_trim(0)`` when the rounds end;
* ``mmap``: ``STABKIT_HEAP_KEEP_MB=0``: blocks of 32 MiB and more are glibc's fresh mmaps, unmapped on free;
* ``jemalloc``, ``tcmalloc``: Debian's ``libjemalloc2`` / ``libtcmalloc-minimal4`` through ``LD_PRELOAD``
  (``apt-get install libjemalloc2 libtcmalloc-minimal4``).

``--child POLICY WORKLOAD ROUNDS`` runs one trial in this process and prints it as JSON (the environment is
the caller's): how ``docs/performance-engine.md`` alternated trials of this tree with those of the tree that
still had the compiled cache. Workloads: ``W5`` (ResNet-18-GN at CIFAR shapes, 2 pairs x 4 clients, one local
step per round: ``benchmarks/workloads.py``), the engine's round after a warm-up round; ``topup``, a digits
top-up job as the atlas runs it (FedSAGD, sample perturbation, 245 pairs, K = 10, B = 16, 20 clients, s = 5).
Reported per trial: seconds per round (median of the timed rounds), minor page faults per round, peak RSS,
the RSS after the release; per policy the median over repetitions with min-max.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")
PRELOAD = {"jemalloc": LIBDIR / "libjemalloc.so.2", "tcmalloc": LIBDIR / "libtcmalloc_minimal.so.4"}
POLICIES = ("stabkit", "mmap", "jemalloc", "tcmalloc")
WORKLOADS = ("W5", "topup")


def policy_env(policy: str) -> dict:
    """The environment of a trial under ``policy``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k not in ("LD_PRELOAD",
                                                                                              "STABKIT_HEAP_KEEP_MB")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    if policy == "mmap":
        env["STABKIT_HEAP_KEEP_MB"] = "0"
    if policy in PRELOAD:
        env["LD_PRELOAD"] = str(PRELOAD[policy])
    return env


def _run(workload: str, rounds: int):
    """A built run of ``workload`` (its engine at one thread)."""
    from benchmarks.workloads import workloads
    from stabkit import RunConfig
    from stabkit.run.experiment import PairedRun

    if workload == "W5":
        w = workloads(1.0, "cpu")["W5"]
        return PairedRun(w.config(2), task=w.task())
    cfg = RunConfig.from_dict(dict(task="digits", algo="fedsagd", perturb="sample", pairs=245, rounds=rounds + 1,
                                   eval_every=rounds + 1, constants=False, local_rounds=[], checkpoint_every=0,
                                   clients=20, participation=0.25, lr=0.05, local_steps=10, batch_size=16))
    return PairedRun(cfg)


def trial(policy: str, workload: str, rounds: int) -> dict:
    """Child process: time ``rounds`` engine rounds of ``workload`` after one warm-up round."""
    import resource

    import torch

    from stabkit.engine import alloc
    from stabkit.engine.determinism import set_deterministic

    torch.set_num_threads(1)
    run = _run(workload, rounds)
    run.engine.threads = 1
    set_deterministic()  # as PairedRun.run does
    run.engine.step(0)
    times, faults = [], resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for t in range(1, rounds + 1):
        start = time.perf_counter()
        run.engine.step(t)
        times.append(time.perf_counter() - start)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / rounds
    disc = float(run.engine.discrepancy().sum())
    del run
    start = time.perf_counter()
    alloc.release()
    release_s = time.perf_counter() - start
    return {"policy": policy, "workload": workload, "round_s": statistics.median(times), "rounds_s": times,
            "faults": faults, "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
            "rss_after_release_gb": _rss() / 2 ** 30, "release_s": release_s, "disc_sum": disc,
            "allocator": alloc.policy()}


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def spawn(policy: str, workload: str, rounds: int) -> dict:
    cmd = [sys.executable, __file__, "--child", policy, workload, str(rounds)]
    done = subprocess.run(cmd, env=policy_env(policy), capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{policy} {workload}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(results: list) -> list:
    """Per workload and policy: median seconds per round with min-max, faults, peak RSS, relative to the first
    policy's."""
    rows = []
    for workload in WORKLOADS:
        base = None
        for policy in POLICIES:
            mine = [r for r in results if r["policy"] == policy and r["workload"] == workload]
            if not mine:
                continue
            secs = [r["round_s"] for r in mine]
            med = statistics.median(secs)
            base = med if base is None else base
            rows.append({"workload": workload, "policy": policy, "median_s": med, "min_s": min(secs),
                         "max_s": max(secs), "vs_first": med / base,
                         "faults": statistics.median(r["faults"] for r in mine),
                         "peak_rss_gb": max(r["peak_rss_gb"] for r in mine),
                         "rss_after_release_gb": statistics.median(r["rss_after_release_gb"] for r in mine),
                         "same_numbers": len({r["disc_sum"] for r in mine}) == 1})
    return rows


REUSE_PROBE = """
from stabkit.engine import alloc
alloc.apply_at_start()
import torch
MB = 1 << 20
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) // 1024
for _ in range(4):                                                 # rounds: the same sizes taken and freed again
    a = torch.ones(64 * MB // 4); del a
before = rss()
b = torch.ones(64 * MB // 4)
print(rss() - before)                                              # MiB the block added (0: taken from kept memory)
"""


def reuse_probe(processes: int) -> dict:
    """How often glibc places a 64 MiB block, taken again after four rounds of the same size, in the memory the
    policy kept (it adds no resident memory) rather than past it: glibc does not promise where an aligned block
    lands, so this is a property of the host, measured here and not asserted by the tests."""
    added = []
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", REUSE_PROBE], capture_output=True, text=True, cwd=ROOT,
                             env={**os.environ, "STABKIT_HEAP_KEEP_MB": "1000"}, check=True).stdout
        added.append(int(out.split()[-1]))
    reused = sum(a < 8 for a in added)
    print(f"reuse probe: {reused} of {processes} processes took the block from kept memory "
          f"(MiB added per process: {added})")
    return {"processes": processes, "reused": reused, "mib_added": added}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--w5-rounds", type=int, default=3)
    ap.add_argument("--digits-rounds", type=int, default=4)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results_allocator.json"))
    ap.add_argument("--reuse-probe", type=int, metavar="N", help="only probe the reuse of a freed 64 MiB block in "
                    "N fresh processes (a host property: docs/performance-engine.md)")
    ap.add_argument("--child", nargs=3, metavar=("POLICY", "WORKLOAD", "ROUNDS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        from stabkit.engine.alloc import apply_at_start

        apply_at_start()  # before torch is imported, as the stabkit command does
        print(json.dumps(trial(args.child[0], args.child[1], int(args.child[2]))))
        return
    if args.reuse_probe:
        reuse_probe(args.reuse_probe)
        return
    policies, results = args.policies.split(","), []
    for rep in range(args.reps):
        order = policies[rep % len(policies):] + policies[:rep % len(policies)]
        for workload, rounds in (("W5", args.w5_rounds), ("topup", args.digits_rounds)):
            for policy in order:
                r = spawn(policy, workload, rounds)
                results.append(r)
                print(f"rep {rep} {workload:5s} {policy:8s} {r['round_s']:.3f} s/round, {r['faults']:.0f} faults, "
                      f"peak {r['peak_rss_gb']:.2f} GB, after release {r['rss_after_release_gb']:.2f} GB", flush=True)
    rows = summarise(results)
    for row in rows:
        print(f"{row['workload']:5s} {row['policy']:8s} median {row['median_s']:.3f} s ({row['min_s']:.3f}-"
              f"{row['max_s']:.3f}) x{row['vs_first']:.2f} of {policies[0]}, {row['faults']:.0f} faults/round, peak "
              f"{row['peak_rss_gb']:.2f} GB, same numbers: {row['same_numbers']}")
    Path(args.json).write_text(json.dumps({"trials": results, "summary": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
