"""The shared side-by-side harness (``../shared/bench/side_by_side.py``) timed in CPU seconds.

    PATH=$PWD/.venv/bin:$PATH .venv/bin/python benchmarks/side_by_side_cpu.py --out side_by_side_cpu.json
    [--bench-dir ../shared/bench] [--workloads logreg,lenet] [--reps 2]

Same data, same commands and the same marginal-round method as the harness (``stabkit pair --task npz``, 8
pairs, one thread; the plain per-client loop ``naive_loop.py`` on one thread), but each side is charged the
CPU seconds it used (``getrusage`` of the ``stabkit`` child; the loop's own timer on ``time.process_time``)
instead of wall seconds. On a machine other jobs load, wall time measures their load (at load average 10-16
on 2 vCPUs the harness's two repetitions of W1 differed 9x); CPU time of a one-thread process does not,
apart from the cache and memory bandwidth the other jobs share. ``STABKIT`` names the command timed.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench-dir", default="../shared/bench", help="where side_by_side.py and naive_loop.py are")
    ap.add_argument("--workloads", default="logreg,lenet")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default="side_by_side_cpu.json")
    args = ap.parse_args(argv)
    bench = Path(args.bench_dir).resolve()
    sys.path.insert(0, str(bench))
    import side_by_side as harness  # noqa: E402 (the shared harness: data, commands, round counts)

    def stabkit_cpu(workload, npz, rounds, out):
        before = _children_cpu()
        harness.stabkit_wall(workload, npz, rounds, out)
        return _children_cpu() - before

    def naive_rps(workload, tmp):
        out = tmp / f"naive_{workload}.json"
        code = ("import runpy, sys, time; time.perf_counter = time.process_time; "
                f"sys.argv = ['naive_loop.py', '--threads', '1', '--workload', {workload!r}, '--rounds', '105', "
                f"'--json', {str(out)!r}]; runpy.run_path({str(bench / 'naive_loop.py')!r}, run_name='__main__')")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"naive loop failed: {done.stderr.strip().splitlines()[-1:]}")
        return json.loads(out.read_text())["rounds_per_s"]

    tmp, result = Path(tempfile.mkdtemp()), {}
    for w in args.workloads.split(","):
        npz = tmp / f"{w}.npz"
        harness.write_npz(w, npz)
        lo, hi = harness.LOHI[w]
        marginal, naive = [], []
        for rep in range(args.reps):  # alternating, as the harness does
            t_lo, t_hi = stabkit_cpu(w, npz, lo, tmp / "lo"), stabkit_cpu(w, npz, hi, tmp / "hi")
            marginal.append((hi - lo) / (t_hi - t_lo))
            naive.append(naive_rps(w, tmp))
            print(f"{w} rep {rep}: stabkit {2 * harness.PAIRS * marginal[-1]:.1f} traj-r/s, "
                  f"naive {naive[-1]:.2f} r/s (CPU time)", flush=True)
        s, n = statistics.median(marginal), statistics.median(naive)
        result[w] = {"stabkit_traj_rounds_per_s": 2 * harness.PAIRS * s, "naive_rounds_per_s": n,
                     "speedup_per_trajectory": 2 * harness.PAIRS * s / n, "clock": "cpu", "threads": 1,
                     "pairs": harness.PAIRS, "reps": args.reps, "load_at_end": os.getloadavg()[0]}
        print(json.dumps(result[w]), flush=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
