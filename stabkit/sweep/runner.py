"""``run_sweep``: expand a spec, skip finished jobs, run the rest on an executor, record every outcome.

The driver is the only writer of the sweep directory: each finished job's files are written to
``jobs/.<id>.tmp`` and the directory is then renamed into place, and the manifest is rewritten
atomically after every state change, so killing the sweep at any moment loses no finished job and
leaves no half-written one; a lock file keeps a second driver out of the directory. A job that crashes
or diverges is recorded as ``failed`` with its message (its metrics up to the divergence are kept) and the
sweep goes on; a full disk stops it with one line. A job an executor lost with its node (after its retries) is
left ``pending`` with the reason, so that re-running the sweep runs it.

Before anything is written, the executor checks the jobs (:meth:`~stabkit.sweep.executors.LocalExecutor.check`):
what each asks of a node, and, where its workers read this machine's files, each job against its data as
``stabkit pair`` checks a run (:mod:`stabkit.sweep.jobcheck`), so a sweep whose data is missing fails at once,
not job by job; its session then checks that every job fits on one of its nodes (GPUs, CPUs:
:mod:`stabkit.sweep.placement`), still before anything is written.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Callable, Optional

from stabkit.store.atomic import atomic_write_json
from stabkit.store.fserrors import undone_on_fs_error
from stabkit.store.outdir import check_writable, prepare_dir
from stabkit.store.rundir import RunDir
from stabkit.sweep.lock import sweep_lock
from stabkit.sweep.manifest import Manifest, short_summary
from stabkit.sweep.spec import SweepSpec


def run_sweep(spec: SweepSpec, out, executor, force: bool = False, retry_failed: bool = False,
              progress: Optional[Callable] = None) -> Manifest:
    """Run every unfinished job of ``spec`` into ``out``; ``progress(event, job_id, manifest, info)``."""
    check_writable(out)  # a --out that is a file or read-only is refused before the jobs are checked
    jobs = spec.jobs()  # validates every job before anything is written
    executor.check(jobs)  # each job's requests, and its data where the workers read this machine's files
    with executor.session(jobs), undone_on_fs_error(out, keep=lambda: has_finished_jobs(out)):
        root = prepare_dir(out)  # (nothing finished: nothing worth keeping)
        with sweep_lock(root):
            return _drive(spec, jobs, root, executor, force, retry_failed, progress)


def has_finished_jobs(root) -> bool:
    """Whether the sweep directory ``root`` holds a finished job's run directory (``jobs/<id>/``; a job being
    written is a hidden ``jobs/.<id>.tmp``)."""
    jobs = Path(root) / "jobs"
    return jobs.is_dir() and any(p.is_dir() and not p.name.startswith(".") for p in jobs.iterdir())


def _drive(spec, jobs, root, executor, force, retry_failed, progress) -> Manifest:
    atomic_write_json(root / "spec.json", spec.to_dict())
    manifest = Manifest(root, spec, jobs, force=force)
    todo = [j for j in jobs if not manifest.finished(j.id, retry_failed)]
    for j in todo:
        if manifest.jobs[j.id]["state"] != "pending":
            manifest.set(j.id, "pending")
    _clean_temporaries(root)
    report = progress or (lambda *a: None)
    report("start", None, manifest, {"todo": len(todo), "total": len(jobs), "recovered": manifest.recovered,
                                     "problem": manifest.problem})

    def on_start(job_id):
        manifest.set(job_id, "running", started=time.time())
        report("running", job_id, manifest, {})

    for job_id, result in executor.run(todo, on_start):
        _store(manifest, job_id, result)
        report("finished", job_id, manifest, result)
    return manifest


def lost_jobs(manifest: Manifest) -> dict:
    """``{job id: why}`` of the jobs an executor lost with their node: left pending, run by a re-run."""
    return {job: rec["error"] for job, rec in manifest.jobs.items() if rec["state"] == "pending" and rec.get("error")}


def _store(manifest: Manifest, job_id: str, result: dict) -> None:
    if result.get("lost"):
        manifest.set(job_id, "pending", error=result["error"])
        return
    final = manifest.job_dir(job_id)
    if result["files"]:
        tmp = final.parent / f".{job_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        summary = dict(result["summary"], out=str(final))
        summary_json = (json.dumps(summary, indent=2, sort_keys=True) + "\n").encode()  # as the job's (NaN kept)
        RunDir(tmp).write_files({**result["files"], RunDir.SUMMARY: summary_json})
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    short = short_summary(result["summary"]) if result["summary"] is not None else None
    state = "failed" if result["error"] else "done"
    manifest.set(job_id, state, error=result["error"], wall_s=round(result["wall_s"], 3), summary=short)


def _clean_temporaries(root: Path) -> None:
    jobs = root / "jobs"
    if jobs.is_dir():
        for p in jobs.glob(".*.tmp"):
            shutil.rmtree(p, ignore_errors=True)
