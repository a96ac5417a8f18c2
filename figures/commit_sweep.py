"""Copy what a sweep's report is drawn from into a folder to commit beside its figures: the sweep's
``manifest.json`` and ``spec.json`` and, of every job, its run files (config, constants, metrics, local
discrepancy, summary; sharpness where measured) — no checkpoints or saved models.

    python figures/commit_sweep.py runs/recipes/NAME figures/recipes/NAME/data
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

SWEEP_FILES = ("manifest.json", "spec.json")
JOB_FILES = ("config.json", "constants.json", "metrics.csv", "local.csv", "summary.json", "sharpness.csv",
             "sharpness.json")


def commit_sweep(sweep: Path, data: Path) -> int:
    """Copy ``sweep``'s report inputs into ``data``; the number of jobs copied."""
    data.mkdir(parents=True, exist_ok=True)
    for name in SWEEP_FILES:
        shutil.copy2(sweep / name, data / name)
    jobs = sorted(p for p in (sweep / "jobs").iterdir() if p.is_dir())
    for job in jobs:
        (data / "jobs" / job.name).mkdir(parents=True, exist_ok=True)
        for name in JOB_FILES:
            if (job / name).is_file():
                shutil.copy2(job / name, data / "jobs" / job.name / name)
    return len(jobs)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(f"{commit_sweep(Path(sys.argv[1]), Path(sys.argv[2]))} jobs copied to {sys.argv[2]}")
