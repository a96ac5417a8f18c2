"""One sweep job as a pure function: config in, run-directory files out (so it can run anywhere).

``execute_job`` runs :func:`stabkit.run_pair` in a private temporary directory and returns the files it
wrote as bytes together with the summary, or the error that stopped it. Returning the files (rather than
writing into the sweep directory) lets a Ray worker on another machine, without a shared file system,
run a job; the driver alone writes results. Every job runs with one intra-op thread, whatever executor
runs it, so CPU reductions are ordered the same way and every executor gives identical metrics.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

JOB_THREADS = 1


def execute_job(config: dict) -> dict:
    """Run one paired run; return ``{"files", "summary", "error", "wall_s"}`` (error None if completed)."""
    import torch  # on use (as the rest): the executors import this module, and a sweep refuses before torch

    from stabkit.config.runconfig import RunConfig
    from stabkit.errors import DiskFull
    from stabkit.run.experiment import run_pair
    from stabkit.store.checkpoint import NAME as CHECKPOINT
    from stabkit.store.fserrors import FileSystemRefused

    threads = torch.get_num_threads()
    torch.set_num_threads(JOB_THREADS)
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="stabkit-job-") as tmp:
            try:
                summary = run_pair(RunConfig.from_dict(config), out=Path(tmp) / "run")
            except (DiskFull, FileSystemRefused):  # every further job would fail alike: stop the sweep, one line
                raise
            except Exception as e:  # a crashing job is recorded, not fatal to the sweep
                return {"files": {}, "summary": None, "error": f"{type(e).__name__}: {e}".splitlines()[0],
                        "wall_s": time.perf_counter() - start}
            if summary["status"] == "interrupted":
                raise KeyboardInterrupt
            # a sweep resumes job by job: the run's checkpoint (binary, as large as the state) stays behind
            files = {p.name: p.read_bytes() for p in sorted((Path(tmp) / "run").iterdir())
                     if p.is_file() and p.name != CHECKPOINT}
    finally:
        torch.set_num_threads(threads)
    error = None
    if summary["status"] == "diverged":
        error = f"diverged: {summary['diverged_reason']} at round {summary['diverged_round']}"
    elif summary["status"] == "failed":  # a plug-in's hook failed mid-run: its one-line reason
        error = summary["failed_reason"]
    summary.pop("out", None)
    return {"files": files, "summary": summary, "error": error, "wall_s": time.perf_counter() - start}
