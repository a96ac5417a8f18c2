"""One sweep job as a pure function: config in, run-directory files out (so it can run anywhere).

``execute_job`` runs :func:`stabkit.run_pair` in a private temporary directory and returns the files it
wrote as bytes together with the summary, or the error that stopped it. Returning the files (rather than
writing into the sweep directory) lets a Ray worker on another machine, without a shared file system,
run a job; the driver alone writes results. Every job runs with one intra-op thread unless it is given more
(``--cpus-per-job``), whatever executor runs it, so CPU reductions are ordered the same way and every executor
gives identical metrics. Its ``config.json`` records where it ran (:mod:`stabkit.sweep.placement`).
"""
from __future__ import annotations

import json
import socket
import tempfile
import time
from pathlib import Path
from typing import Optional

JOB_THREADS = 1


def execute_job(config: dict, threads: int = JOB_THREADS, gpu_ids: Optional[list] = None,
                node: Optional[dict] = None, task=None) -> dict:
    """Run one paired run on ``threads`` torch threads; return ``{"files", "summary", "error", "wall_s"}`` (error
    None if completed). ``gpu_ids``: the GPUs the job was given ([]: none, so ``device auto`` runs on the CPU;
    None: whatever this process sees); ``node``: the Ray node it runs on and the attempt (``{"node_id",
    "attempt"}``; None: the local executor); ``task``: its task, built already (shipped by the driver), or
    None to build it here. A failure on a Ray node names the node."""
    import torch  # on use (as the rest): the executors import this module, and a sweep refuses before torch

    from stabkit.config.runconfig import RunConfig
    from stabkit.errors import DiskFull
    from stabkit.run.experiment import run_pair
    from stabkit.store.fserrors import FileSystemRefused
    from stabkit.store.rundir import RunDir

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    start, began = time.perf_counter(), time.time()
    held_none = gpu_ids is not None and not gpu_ids and config.get("device", "auto") == "auto"
    try:
        with tempfile.TemporaryDirectory(prefix="stabkit-job-") as tmp:
            try:
                summary = run_pair(RunConfig.from_dict(dict(config, device="cpu") if held_none else config),
                                   out=Path(tmp) / "run", task=task)
            except (DiskFull, FileSystemRefused):  # every further job would fail alike: stop the sweep, one line
                raise
            except Exception as e:  # a crashing job is recorded, not fatal to the sweep
                where = f"on node {node['node_id']} ({socket.gethostname()}): " if node else ""
                return {"files": {}, "summary": None, "error": where + f"{type(e).__name__}: {e}".splitlines()[0],
                        "wall_s": time.perf_counter() - start}
            if summary["status"] == "interrupted":
                raise KeyboardInterrupt
            # a sweep resumes job by job: the run's checkpoint (binary, as large as the state) stays behind
            files = {p.name: p.read_bytes() for p in sorted((Path(tmp) / "run").iterdir())
                     if p.is_file() and p.name != RunDir.CHECKPOINT}
    finally:
        torch.set_num_threads(before)
    files[RunDir.CONFIG] = _placed(files[RunDir.CONFIG], config, node, gpu_ids, began)
    error = None
    if summary["status"] == "diverged":
        error = f"diverged: {summary['diverged_reason']} at round {summary['diverged_round']}"
    elif summary["status"] == "failed":  # a plug-in's hook failed mid-run: its one-line reason
        error = summary["failed_reason"]
    summary.pop("out", None)
    return {"files": files, "summary": summary, "error": error, "wall_s": time.perf_counter() - start}


def _placed(config_json: bytes, config: dict, node, gpu_ids, began: float) -> bytes:
    """The run's ``config.json`` with the job's own device (a job that held no GPU ran ``auto`` as ``cpu``)
    and where it ran."""
    import torch

    from stabkit.store.atomic import strict_json
    from stabkit.sweep.placement import record

    written = json.loads(config_json)
    if gpu_ids is None:  # in this process: the device it used is the GPU it had
        device = torch.device(written["device_used"])
        gpu_ids = [device.index or 0] if device.type == "cuda" else []
    written.update(device=config.get("device", written["device"]),
                   placement=record(node, gpu_ids, written["device_used"], began))
    return (strict_json(written, indent=2, sort_keys=True) + "\n").encode()
