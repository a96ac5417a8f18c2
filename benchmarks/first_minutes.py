"""A new user's first minutes, timed as whole processes: the quickstart, the demo's commands, and the smallest
run against ``python -c "import torch"``, on the machine as it is and with a competing busy process beside it.

Each command runs ``--reps`` times (median reported) after one warm-up run that is not counted. The split of
a run's time comes from its own ``time:`` line (start-up, training, evaluation, writing, constants, other:
shares of the whole process, start-up included). The busy case starts one process spinning on a CPU for the
duration (on the 2 vCPUs of the project's machines, one physical core, it takes half the machine). Usage:

    .venv/bin/python benchmarks/first_minutes.py [--reps 5] [--busy] [--demo 3] [--json out.json]

Reports: the quickstart's median wall time and its split; ``--demo``: each of the demo's three commands and
their sum (median of ``--demo`` runs each); ``pair --rounds 1 --pairs 1 --no-constants`` against ``import torch`` (ratio of medians).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STABKIT = [sys.executable, "-m", "stabkit_cli"]
QUICKSTART = ["pair", "--algo", "fedsagd", "--perturb", "client", "--rounds", "30", "--pairs", "4"]
DEMO = [("fedsagd", ["pair", "--algo", "fedsagd", "--perturb", "client", "--local-rounds", "0,50"]),
        ("fedavg", ["pair", "--algo", "fedavg", "--perturb", "client", "--local-rounds", "0,50"])]
SMALLEST = ["pair", "--rounds", "1", "--pairs", "1", "--no-constants"]
TIME_LINE = re.compile(r"^time: ([\d.e+]+) s \((.*)\)$", re.M)


def _spin():
    while True:
        pass


def timed(cmd: list, cwd: Path) -> tuple:
    """(wall seconds, the command's output) of one run of ``cmd``."""
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr[-1000:]}")
    return wall, done.stdout + done.stderr


def split(output: str) -> dict:
    """The phases of the run's ``time:`` line, in seconds."""
    m = TIME_LINE.search(output)
    if m is None:
        return {}
    total = float(m.group(1))
    parts = (p.rsplit(" ", 1) for p in m.group(2).split(", "))
    return {name: total * int(share.rstrip("%")) / 100 for name, share in parts}


def median_of(cmd: list, reps: int, work: Path) -> dict:
    """Median wall time of ``reps`` runs of ``cmd`` after one warm-up, and the median of each phase."""
    timed(cmd, work)  # warm-up: file caches, bytecode
    walls, phases = [], []
    for _ in range(reps):
        wall, out = timed(cmd, work)
        walls.append(wall)
        phases.append(split(out))
    names = sorted({n for p in phases for n in p})
    return {"wall_s": statistics.median(walls), "walls": walls,
            "phases_s": {n: statistics.median(p.get(n, 0.0) for p in phases) for n in names}}


def measure(reps: int, demo_reps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        out = {"quickstart": median_of(STABKIT + QUICKSTART + ["--out", "q", "--overwrite", "--quiet"], reps, work),
               "smallest": median_of(STABKIT + SMALLEST + ["--out", "s", "--overwrite", "--quiet"], reps, work),
               "import_torch": median_of([sys.executable, "-c", "import torch"], reps, work)}
        out["smallest_over_import_torch"] = out["smallest"]["wall_s"] / out["import_torch"]["wall_s"]
        if demo_reps:
            for name, args in DEMO:
                out[f"demo_{name}"] = median_of(STABKIT + args + ["--out", f"demo/{name}", "--overwrite", "--quiet"],
                                                demo_reps, work)
            out["demo_bounds"] = median_of(STABKIT + ["bounds", "demo/fedsagd", "demo/fedavg", "--plot", "--out",
                                                      "demo/figures"], demo_reps, work)
            out["demo_total_s"] = sum(out[f"demo_{k}"]["wall_s"] for k in ("fedsagd", "fedavg", "bounds"))
    return out


def report(label: str, r: dict) -> None:
    q = r["quickstart"]
    print(f"[{label}] quickstart: {q['wall_s']:.2f} s (median of {len(q['walls'])}); "
          + ", ".join(f"{k} {v:.2f} s" for k, v in q["phases_s"].items()))
    print(f"[{label}] pair --rounds 1 --pairs 1 --no-constants: {r['smallest']['wall_s']:.2f} s = "
          f"{r['smallest_over_import_torch']:.2f}x import torch ({r['import_torch']['wall_s']:.2f} s)")
    if "demo_total_s" in r:
        print(f"[{label}] demo: {r['demo_total_s']:.1f} s (fedsagd {r['demo_fedsagd']['wall_s']:.1f}, fedavg "
              f"{r['demo_fedavg']['wall_s']:.1f}, bounds --plot {r['demo_bounds']['wall_s']:.1f})")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--busy", action="store_true", help="also measure with one busy process beside the commands")
    ap.add_argument("--demo", type=int, default=0, metavar="REPS",
                    help="also time the demo's three commands, REPS runs each (0: not)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results_first_minutes.json"))
    args = ap.parse_args(argv)
    results = {"idle": measure(args.reps, args.demo)}
    report("as the machine is", results["idle"])
    if args.busy:
        spinner = multiprocessing.Process(target=_spin, daemon=True)
        spinner.start()
        try:
            results["busy"] = measure(args.reps, args.demo)
        finally:
            spinner.terminate()
        report("one busy process beside", results["busy"])
        results["busy_over_idle_quickstart"] = results["busy"]["quickstart"]["wall_s"] / \
            results["idle"]["quickstart"]["wall_s"]
        print(f"quickstart busy / idle: {results['busy_over_idle_quickstart']:.2f}x")
    Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
