"""The sweep manifest: which jobs a sweep directory holds and the state of each, rewritten atomically.

``DIR/manifest.json`` records the spec (and its hash) and, per job, its state (``pending``, ``running``,
``done``, ``failed``), its config hash, error message, wall time and a short summary. Finished jobs live
in ``DIR/jobs/<id>/`` (moved there whole, so a job directory either is complete or does not exist); a job
counts as done only if the manifest says so *and* its ``summary.json`` is there, so deleting a job's
directory makes the next run redo it. Only the sweep driver writes the manifest.

A missing, truncated or key-less manifest is rebuilt from the job directories: a directory whose
``config.json`` hashes to a job's config hash and that holds a ``summary.json`` is that job, finished, so
deleting or damaging the manifest never reruns finished work.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from stabkit.config.runconfig import CHOSEN_BY_RUN, RUN_FACTS
from stabkit.errors import ConfigError
from stabkit.store.atomic import atomic_write_json
from stabkit.store.rundir import RunDir
from stabkit.sweep.spec import SweepSpec, config_hash

MANIFEST = "manifest.json"
TERMINAL = ("done", "failed")
STATES = ("pending", "running") + TERMINAL


class Manifest:
    """Job states of one sweep directory."""

    def __init__(self, root: Path, spec: SweepSpec, jobs: list, force: bool = False):
        """Open ``root`` for ``spec``: refuse a different spec unless ``force`` (then changed jobs are redone)."""
        self.root = Path(root)
        self.spec = spec
        path = self.root / MANIFEST
        old, self.problem = _load(path)
        if old is None and (self.root / "jobs").is_dir():
            old = {"spec_hash": spec.hash, "jobs": recover_jobs(self.root, jobs)}
        self.recovered = len(old["jobs"]) if self.problem and old else 0  # jobs found again after a damaged manifest
        if old is not None and old["spec_hash"] != spec.hash and not force:
            raise ConfigError(f"invalid out={str(self.root)!r}: it holds a different sweep ({old['spec'].get('name')!r}, "
                              f"spec changed); use a new --out, or --force to redo the jobs whose config changed")
        previous = (old or {}).get("jobs", {})
        self.jobs = {}
        for job in jobs:
            rec = previous.get(job.id)
            if rec is None or rec.get("config_hash") != job.config_hash or rec["state"] == "running":
                rec = {"state": "pending", "config_hash": job.config_hash}  # new, changed or cut off
            self.jobs[job.id] = {**rec, "params": job.params}
        self.save()

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def finished(self, job_id: str, retry_failed: bool = False) -> bool:
        """True if the job needs no work: done with its outputs present, or failed (unless retrying)."""
        rec = self.jobs[job_id]
        if rec["state"] == "done":
            return RunDir(self.job_dir(job_id)).has(RunDir.SUMMARY)
        return rec["state"] == "failed" and not retry_failed

    def set(self, job_id: str, state: str, **fields) -> None:
        rec = {k: v for k, v in self.jobs[job_id].items() if k in ("config_hash", "params")}
        self.jobs[job_id] = {**rec, "state": state, **fields}
        self.save()

    def counts(self) -> dict:
        out = {"pending": 0, "running": 0, "done": 0, "failed": 0}
        for rec in self.jobs.values():
            out[rec["state"]] += 1
        return out

    def save(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.root / MANIFEST, {"spec": self.spec.to_dict(), "spec_hash": self.spec.hash,
                                                 "axes": self.spec.axes, "jobs": self.jobs})


def short_summary(s: dict) -> dict:
    """The few numbers of a job's summary the manifest keeps."""
    return {"final_disc": s["final_disc"]["mean"], "rounds_done": s["rounds_done"],
            "final_test_acc": (s.get("final_test_acc") or {}).get("mean")}


def _load(path: Path) -> tuple[Optional[dict], Optional[str]]:
    """(manifest, None), (None, None) if there is none, or (None, what is wrong with it)."""
    if not path.is_file():
        return None, ("missing" if (path.parent / "jobs").is_dir() else None)
    try:
        old = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"not valid JSON ({str(e).splitlines()[0]})"
    if not isinstance(old, dict) or not {"spec", "spec_hash", "jobs", "axes"} <= set(old):
        return None, "missing its keys spec, spec_hash, axes, jobs"
    if not isinstance(old["jobs"], dict) or not all(isinstance(r, dict) and r.get("state") in STATES
                                                    for r in old["jobs"].values()):
        return None, "holding job records without a valid state"
    return old, None


def recover_jobs(root: Path, jobs: list) -> dict:
    """Manifest records of the finished jobs found in ``root/jobs``, matched by config hash."""
    found = {}
    for job in jobs:
        run = RunDir(Path(root) / "jobs" / job.id)
        try:
            config, summary = run.config, run.summary
        except ConfigError:  # no run there, or a damaged one: the job runs again
            continue
        if summary is None:  # unfinished
            continue
        recorded = {k: v for k, v in config.items() if k not in RUN_FACTS}
        recorded.update({k: None for k in CHOSEN_BY_RUN if job.config.get(k) is None})  # the run's own choice
        if config_hash(recorded) != job.config_hash:
            continue
        error = None
        if summary.get("status") == "diverged":
            why = summary.get("diverged_reason", "non-finite values")
            error = f"diverged: {why} at round {summary['diverged_round']}"
        found[job.id] = {"state": "failed" if error else "done", "config_hash": job.config_hash, "error": error,
                         "summary": short_summary(summary), "recovered": True}
    return found


def read_manifest(root) -> dict:
    """The manifest of a sweep directory (for ``stabkit report``); a damaged one is a one-line error that
    says how to rebuild it."""
    path = Path(root) / MANIFEST
    old, problem = _load(path)
    if old is None and problem is None:
        raise ConfigError(f"invalid sweep={str(root)!r}: expected a sweep directory containing {MANIFEST}")
    if old is None:
        raise ConfigError(f"invalid sweep={str(root)!r}: {MANIFEST} is {problem}; rebuild it from the finished job "
                          f"directories with `stabkit sweep {Path(root) / 'spec.json'} --out {root}` (no finished "
                          f"job is rerun)")
    return old
