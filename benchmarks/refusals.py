"""How fast, and how cleanly, bad invocations are refused: every case of the suite's bad-input tables run as a
user runs it (a fresh ``stabkit`` process, Python start-up and imports included), timed.

A case is *clean* when the process exits with status 2 and prints exactly one line ``error: ...`` holding the
case's expected text, and nothing else on stderr. Each case also records whether torch was imported by the time
it was refused (``torch``). Reports the number of cases, the number clean, the median, 90th percentile and
slowest wall time, overall, per table and over the cases refused before torch. The tables are the suite's
bad-input tables (tests/cli/test_bad_inputs.py, the Flower bridge's and Flower apps' tables in tests/algorithms/flower).
Usage:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/refusals.py
        [--tables pair,sweep,other,outputs,tensorboard,flatness,flower,app] [--every N]
        [--json benchmarks/results_refusals.json]

``--every N`` times every N-th case of each table (a quicker sample).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.cli import test_bad_inputs as tables  # noqa: E402

# the `stabkit` entry point's own code, and at exit a mark whether torch was imported by then
ENTRY = ("import atexit, os, sys\n"
         "atexit.register(lambda: 'torch' in sys.modules and open(os.environ['STABKIT_BENCH_TORCH'], 'w').close())\n"
         "sys.argv[0] = 'stabkit'\nfrom stabkit_cli.main import main\nmain()\n")


def cases(names: list, every: int) -> list:
    """``(table, args, needle)`` of the chosen tables (the sweep table with its tiny-sweep defaults, the
    flatness table on a saved run)."""
    out = []
    for name in names:
        rows = {"pair": tables.PAIR, "sweep": tables.SWEEP, "other": tables.OTHER, "outputs": tables.OUTPUTS,
                "tensorboard": tables.TENSORBOARD, "flatness": tables.FLATNESS}.get(name)
        if name in ("flower", "app"):
            from tests.algorithms.flower import test_flower_app, test_flower_bad_inputs
            rows = test_flower_bad_inputs.FLOWER if name == "flower" else test_flower_app.APP
        for args, needle in rows[::every]:
            if name == "pair":
                args = ["pair", *args]
            elif name == "sweep":
                args = tables.sweep_command(args)
            elif name == "flower":
                args = ["pair", *args, *test_flower_bad_inputs.BASE]
            elif name == "app":
                args = ["pair", *args, "--pairs", "1", "--rounds", "2", "--quiet"]
            out.append((name, list(args), needle))
    return out


def run_case(table: str, args: list, needle: str, saved_run: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="stabkit-refusal-") as tmp:
        tmp = Path(tmp)
        if table == "flatness":
            shutil.copytree(saved_run, tmp / "run")
            for name in [a[1:] for a in args if a.startswith("@")]:
                tables.DAMAGE[name](tmp / "run")
            args = [a for a in args if not a.startswith("@")]
        else:
            args = tables._materialise(args, tmp)
        path = [str(ROOT)] + [str(ROOT / ".wtpath")] * (ROOT / ".wtpath").is_dir()  # a worktree's own CLI
        flag = tmp / ".torch-imported"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), "STABKIT_BENCH_TORCH": str(flag)}
        start = time.perf_counter()  # the tables' plug-ins are tests.plugin_fixtures and tests.flower_fixtures
        done = subprocess.run([sys.executable, "-c", ENTRY, *args], cwd=tmp, capture_output=True, text=True, env=env)
        took = time.perf_counter() - start
        torch_imported = flag.is_file()
    lines = done.stderr.strip().splitlines()
    clean = done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    return {"table": table, "args": args[:12], "seconds": round(took, 3), "clean": clean, "torch": torch_imported,
            "exit": done.returncode, "stderr": done.stderr.strip()[-300:]}


def saved_run_dir(root: Path) -> Path:
    from stabkit import RunConfig, run_pair

    run_pair(RunConfig(rounds=2, pairs=2, hidden=8, constants=False), out=root / "saved")
    return root / "saved"


def _before_torch(results: list) -> dict:
    """Median and slowest time of the cases refused before torch was imported, and the slowest after."""
    before = [r["seconds"] for r in results if not r["torch"]]
    after = [r["seconds"] for r in results if r["torch"]]
    return {"before_torch": len(before), "before_torch_median_s": float(np.median(before)) if before else None,
            "before_torch_max_s": max(before, default=None), "after_torch_max_s": max(after, default=None)}


def _s(seconds) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="pair,sweep,other,outputs,tensorboard,flatness,flower,app")
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    names = a.tables.split(",")
    with tempfile.TemporaryDirectory(prefix="stabkit-refusals-") as root:
        saved = saved_run_dir(Path(root)) if "flatness" in names else None  # the run the flatness cases read
        results = [run_case(t, args, needle, saved) for t, args, needle in cases(names, a.every)]
    seconds = np.array([r["seconds"] for r in results])
    report = {"cases": len(results), "clean": sum(r["clean"] for r in results),
              "median_s": float(np.median(seconds)), "p90_s": float(np.percentile(seconds, 90)),
              "max_s": float(seconds.max()), **_before_torch(results), "per_table_median_s": {
                  t: float(np.median([r["seconds"] for r in results if r["table"] == t]))
                  for t in dict.fromkeys(r["table"] for r in results)},
              "not_clean": [r for r in results if not r["clean"]], "results": results}
    print(f"{report['cases']} cases, {report['clean']} clean; refusal time median {report['median_s']:.2f} s, "
          f"90th percentile {report['p90_s']:.2f} s, slowest {report['max_s']:.2f} s; {report['before_torch']} "
          f"refused before torch: median {_s(report['before_torch_median_s'])}, slowest "
          f"{_s(report['before_torch_max_s'])}; after torch, slowest {_s(report['after_torch_max_s'])}; per table "
          + ", ".join(f"{t} {s:.2f} s" for t, s in report["per_table_median_s"].items()))
    if a.json:
        Path(a.json).write_text(json.dumps(report, indent=2) + "\n")
    return report


if __name__ == "__main__":
    main()
