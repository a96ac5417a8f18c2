"""The sweep manifest: which jobs a sweep directory holds and the state of each, rewritten atomically.

``DIR/manifest.json`` records the spec (and its hash) and, per job, its state (``pending``, ``running``,
``done``, ``failed``), its config hash, error message, wall time and a short summary. Finished jobs live
in ``DIR/jobs/<id>/`` (moved there whole, so a job directory either is complete or does not exist); a job
counts as done only if the manifest says so *and* its ``summary.json`` is there, so deleting a job's
directory makes the next run redo it. Only the sweep driver writes the manifest.
"""
from __future__ import annotations

import json
from pathlib import Path

from stabkit.errors import ConfigError
from stabkit.run.runstore import atomic_write_json
from stabkit.sweep.spec import SweepSpec

MANIFEST = "manifest.json"
TERMINAL = ("done", "failed")


class Manifest:
    """Job states of one sweep directory."""

    def __init__(self, root: Path, spec: SweepSpec, jobs: list, force: bool = False):
        """Open ``root`` for ``spec``: refuse a different spec unless ``force`` (then changed jobs are redone)."""
        self.root = Path(root)
        self.spec = spec
        path = self.root / MANIFEST
        old = json.loads(path.read_text()) if path.is_file() else None
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
            return (self.job_dir(job_id) / "summary.json").is_file()
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


def read_manifest(root) -> dict:
    """The manifest of a sweep directory (for ``stabkit report``)."""
    path = Path(root) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"invalid sweep={str(root)!r}: expected a sweep directory containing {MANIFEST}")
    return json.loads(path.read_text())
