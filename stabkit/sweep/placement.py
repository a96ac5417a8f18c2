"""Where a sweep job runs: the GPUs and CPUs it asks for, the check that some node can hold it, and the
record of where it ran.

A job holds ``--gpus-per-job`` GPUs (a fraction packs small jobs: 0.25 puts four on a GPU) and
``--cpus-per-job`` CPUs (its torch threads). Left open, a job whose device is ``cuda`` holds one GPU, a job
whose device is ``auto`` holds one where the cluster or machine has GPUs and none elsewhere, and a ``--device
cpu`` job never holds one. A job that holds no GPU runs on the CPU even with ``auto``: with Ray 2.60 a task
that asks for no GPU still sees every GPU of its node, and every such job would otherwise pick ``cuda:0``.

Each finished job's ``config.json`` records ``"placement": {"node_id", "attempt", "host", "gpu_ids", "device",
"start", "end"}``: the Ray node (None on the local executor), which try it was (0: the first; 1 or more: run
again after its node or worker died), the machine's host name, the GPU ids it was given, the device it used,
and when it started and ended there (seconds since the epoch; how many ran at once on a node is read from
these).
"""
from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass
from typing import Optional

from stabkit.errors import ConfigError, require


@dataclass(frozen=True)
class Resources:
    """What every job asks for: ``gpus`` (None: chosen per job, see :meth:`gpus_for`) and ``cpus``."""

    gpus: Optional[float] = None
    cpus: int = 1

    def __post_init__(self):
        g = self.gpus
        require(g is None or (isinstance(g, (int, float)) and math.isfinite(g) and g >= 0
                              and (g <= 1 or float(g).is_integer())), "gpus_per_job", g,
                "a number >= 0: a fraction up to 1 (0.25 packs four jobs on a GPU) or a whole number of GPUs")
        require(isinstance(self.cpus, int) and not isinstance(self.cpus, bool) and self.cpus >= 1,
                "cpus_per_job", self.cpus, "a positive integer (the job's torch threads)")

    def gpus_for(self, device: str, gpus_exist: bool) -> float:
        """The GPUs a job on ``device`` holds, where some node has a GPU (``gpus_exist``) or none has."""
        if device == "cpu":
            return 0.0
        if self.gpus is not None:
            return float(self.gpus)
        return 1.0 if device.startswith("cuda") or gpus_exist else 0.0


@dataclass(frozen=True)
class Node:
    """A machine jobs can run on: its name in messages, its GPUs and CPUs."""

    name: str
    gpus: float
    cpus: float


def check_requests(jobs: list, res: Resources) -> None:
    """Refuse a job on a ``cuda`` device that is to hold no GPU (``--gpus-per-job 0``), wherever it would run."""
    for job in jobs:
        device = job.config.get("device") or "auto"
        if device.startswith("cuda") and res.gpus == 0:
            raise ConfigError(f"invalid gpus_per_job=0: sweep job {job.id} runs on device {device!r}, which needs "
                              f"a GPU; give --gpus-per-job above 0, or device auto or cpu")


def plan_gpus(jobs: list, res: Resources, nodes: list) -> dict:
    """``{job id: GPUs it holds}``, after checking that every job fits on some node (one line for the first
    that does not, naming the job, what it asks for and the nodes)."""
    require(bool(nodes), "executor", "ray", "a cluster with at least one live node")
    check_requests(jobs, res)
    gpus_exist = any(n.gpus > 0 for n in nodes)
    most = max(nodes, key=lambda n: (n.gpus, n.cpus))
    plan = {}
    for job in jobs:
        device = job.config.get("device") or "auto"
        gpus = res.gpus_for(device, gpus_exist)
        if device.startswith("cuda") and not gpus_exist:
            raise ConfigError(f"invalid device={device!r} (sweep job {job.id}): no node has a GPU (nodes: "
                              f"{_describe(nodes)}); add a GPU node, or use device auto or cpu")
        if not any(gpus <= n.gpus and res.cpus <= n.cpus for n in nodes):
            what = f"gpus_per_job={gpus:g}" if gpus > most.gpus else f"cpus_per_job={res.cpus}"
            raise ConfigError(f"invalid {what}: no node fits "
                              f"sweep job {job.id}, which asks for {gpus:g} GPU(s) and {res.cpus} CPU(s) (nodes: "
                              f"{_describe(nodes)})")
        plan[job.id] = gpus
    return plan


def _describe(nodes: list) -> str:
    return ", ".join(f"{n.name}: {n.gpus:g} GPU(s), {n.cpus:g} CPU(s)" for n in nodes)


def this_machine() -> Node:
    """This machine as a node: the GPUs torch counts (without initialising CUDA) and the CPUs it may use."""
    import torch

    from stabkit.engine.threads import usable_cpus

    return Node("this machine", float(torch.cuda.device_count()), float(len(usable_cpus())))


def record(node: Optional[dict], gpu_ids: list, device: str, start: float) -> dict:
    """The ``placement`` entry of a job's ``config.json``; ``node``: ``{"node_id", "attempt"}`` on Ray."""
    return {"node_id": None, "attempt": 0, **(node or {}), "host": socket.gethostname(), "gpu_ids": list(gpu_ids),
            "device": device, "start": start, "end": time.time()}
