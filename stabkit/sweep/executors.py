"""Executors: where a sweep's jobs run. Each yields ``(job_id, result)`` as jobs finish.

* ``local`` (default): in this process, one job after another; with ``workers > 1`` a pool of spawned
  processes. Every job already batches all its pairs (and clients) into one tensor program, so a pool
  only helps when cores are idle; results are identical either way (see :mod:`stabkit.sweep.job`). On a
  machine with GPUs the pool gives its workers GPUs round-robin by ``--gpus-per-job`` (set in
  ``CUDA_VISIBLE_DEVICES`` before the worker initialises CUDA), and runs no more workers than the GPUs hold.
* ``ray``: Ray tasks asking for ``--cpus-per-job`` CPUs and ``--gpus-per-job`` GPUs (Ray assigns the GPU ids
  and sets ``CUDA_VISIBLE_DEVICES``), spread over the nodes, on an existing cluster (``address="HOST:PORT"``
  or ``"auto"``), or on a fresh Ray instance started for the sweep and stopped after it (``address="local"``:
  never a cluster an earlier ``ray start`` recorded, which may be long gone). Before anything runs, the
  address a sweep would join (HOST:PORT, or for ``auto`` the one Ray would pick: ``RAY_ADDRESS``, else the
  last ``ray start``) must accept connections, so a dead cluster is refused at once instead of being retried
  for minutes. A job that dies with its worker or node (a system failure) is retried on another node up to
  ``SYSTEM_RETRIES`` times; a job that raises is recorded failed, as on the local executor; a job still lost
  after its retries is left pending, so that re-running the sweep runs it. With ``ship_data`` the jobs read
  their task's arrays from Ray's object store (:mod:`stabkit.sweep.shipping`). Ray is imported only here.

Both check the jobs before anything is written: :meth:`check` refuses a job whose requests no node could
meet and, where the workers read this machine's files (the local executor; Ray on ``auto`` or ``local``, or
with ``ship_data``, whose arrays are built here), each job against its data as ``stabkit pair`` checks a run
(:mod:`stabkit.sweep.jobcheck`); a remote cluster's workers read their own files, so their data is not checked
here. When the sweep starts (:meth:`session`) they check that every job fits on some node
(:func:`stabkit.sweep.placement.plan_gpus`). ``on_start(job_id)`` is called when a job is handed to
a worker, for progress reporting.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import os
import socket
from contextlib import contextmanager
from typing import Callable, Iterator

from stabkit.engine import machine
from stabkit.errors import ConfigError, require
from stabkit.extras import require_extra
from stabkit.sweep import EXECUTORS
from stabkit.sweep.job import execute_job
from stabkit.sweep.jobcheck import check_job_data
from stabkit.sweep.placement import Node, Resources, check_requests, plan_gpus, this_machine

CONNECT_TIMEOUT_S = 3.0  # a cluster address that does not answer within this is refused before the sweep starts
SYSTEM_RETRIES = 2  # a job whose worker or node dies is run again on another node at most this many times


class LocalExecutor:
    """Jobs in this process (``workers=1``) or in a process pool."""

    def __init__(self, workers: int = 1, resources: Resources = Resources()):
        require(isinstance(workers, int) and workers >= 1, "workers", workers, "a positive integer")
        self.workers, self.resources = workers, resources
        self._gpus: dict = {}

    def check(self, jobs: list) -> None:
        """Refuse a job that asks for a GPU it may not hold, or that fails its run's checks on its data."""
        check_requests(jobs, self.resources)
        check_job_data(jobs)

    @contextmanager
    def session(self, jobs: list):
        """Check that every job fits on this machine (its GPUs and CPUs)."""
        self._node = this_machine()
        self._gpus = plan_gpus(jobs, self.resources, [self._node])
        yield self

    def run(self, jobs: list, on_start: Callable) -> Iterator:
        threads = self.resources.cpus
        if self.workers == 1:
            for job in jobs:
                on_start(job.id)
                yield job.id, execute_job(job.config, threads, None if self._gpus[job.id] else [])
            return
        share = max((self._gpus[j.id] for j in jobs), default=0.0)
        workers = min(self.workers, _gpu_slots(self._node.gpus, share)) if share else self.workers
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
        counter = ctx.Value("i", 0)
        with cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_start_worker,
                                    initargs=(counter, share, int(self._node.gpus))) as pool:
            futures = {}
            for job in jobs:
                futures[pool.submit(_pool_job, job.config, threads, self._gpus[job.id] > 0)] = job.id
                on_start(job.id)
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()


def _gpu_slots(gpus: float, share: float) -> int:
    """How many jobs holding ``share`` GPUs each fit on ``gpus`` GPUs at once."""
    return int(gpus) * math.floor(1 / share) if share <= 1 else int(gpus // share)


_WORKER_GPUS: list = []  # the GPU ids this pool worker was given (set by _start_worker)


def _start_worker(counter, share: float, gpus: int) -> None:
    """A pool worker's start, before torch is imported: the allocator policy, and its GPUs by its number k
    (k % GPUs for a fraction, k*share.. for whole GPUs), set in ``CUDA_VISIBLE_DEVICES``."""
    machine.apply()
    with counter.get_lock():
        k = counter.value
        counter.value += 1
    if share <= 0 or gpus <= 0:
        return
    local = [k % gpus] if share <= 1 else [(k * int(share) + i) % gpus for i in range(int(share))]  # (a worker
    # replaced after a crash takes the next number: modulo keeps it on the machine's GPUs)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    names = visible.split(",") if visible else [str(i) for i in range(gpus)]
    _WORKER_GPUS[:] = [int(n) if n.strip().isdigit() else n for n in (names[i] for i in local)]
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(names[i] for i in local)


def _pool_job(config: dict, threads: int, holds_gpu: bool) -> dict:
    return execute_job(config, threads, list(_WORKER_GPUS) if holds_gpu else [])


def _ray_job(config: dict, threads: int, holds_gpu: bool, task=None) -> dict:
    """A job in a Ray worker: the GPUs Ray gave it and the node it runs on; ``task``: its shipped task (Ray
    passes the object itself), or None to build it from the node's data files."""
    import ray

    context = ray.get_runtime_context()
    ids = context.get_accelerator_ids().get("GPU", []) if holds_gpu else []
    attempt = ray._private.worker.global_worker.core_worker.get_current_task_attempt_number()  # 0: the first try
    return execute_job(config, threads, [int(i) if str(i).isdigit() else i for i in ids],
                       {"node_id": context.get_node_id(), "attempt": attempt}, task)


class RayExecutor:
    """Jobs as Ray tasks on a cluster reached by ``address`` (HOST:PORT, auto, or local)."""

    def __init__(self, address: str, resources: Resources = Resources(), ship_data: bool = False):
        require(bool(address), "address", address, "HOST:PORT of a Ray cluster, auto, or local")
        require_extra("ray")
        if address == "auto":
            _check_reachable(_auto_address(), "auto")
        elif address != "local":
            _check_reachable(address)
        self.address, self.resources, self.ship_data = address, resources, ship_data
        self._gpus: dict = {}
        self._shipped: dict = {}

    def check(self, jobs: list) -> None:
        """Refuse a job that asks for a GPU it may not hold and, where the workers read this machine's files
        or the arrays are shipped from here, one that fails its run's checks on its data."""
        check_requests(jobs, self.resources)
        if self.address in ("auto", "local") or self.ship_data:  # a remote cluster's nodes hold their own data
            check_job_data(jobs)

    @contextmanager
    def session(self, jobs: list):
        """Connected to the cluster, every job checked to fit on one of its live nodes; disconnected at the end."""
        ray = require_extra("ray")
        try:
            local = {"_node_ip_address": "127.0.0.1"} if self.address == "local" else {}  # a private instance
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
                     **local)
        except ConnectionError as e:
            if "Authentication" in str(e.__cause__):  # Ray >= 2.5x: heads started with a token require it
                raise ConfigError(f"invalid address={self.address!r}: the Ray cluster there requires token "
                                  "authentication; set RAY_AUTH_MODE=token (the token in ~/.ray/auth_token or "
                                  "RAY_AUTH_TOKEN)") from None
            raise ConfigError(f"invalid address={self.address!r}: no Ray cluster there ({str(e).splitlines()[0]})") from None
        try:
            self._gpus = plan_gpus(jobs, self.resources, cluster_nodes())
            if self.ship_data:
                from stabkit.sweep.shipping import ship_tasks

                stores = [n["Resources"].get("object_store_memory", 0.0) for n in ray.nodes() if n.get("Alive")]
                self._shipped = ship_tasks(jobs, min(stores))
            yield self
        finally:
            ray.shutdown()

    def run(self, jobs: list, on_start: Callable) -> Iterator:
        from stabkit.sweep.shipping import task_key

        ray = require_extra("ray")
        task = ray.remote(_ray_job)
        pending = {}
        for job in jobs:
            gpus, cpus = self._gpus[job.id], self.resources.cpus
            placed = task.options(num_cpus=cpus, num_gpus=gpus, max_retries=SYSTEM_RETRIES, retry_exceptions=False,
                                  scheduling_strategy="SPREAD")
            shipped = self._shipped.get(task_key(job.config)) if self._shipped else None
            pending[placed.remote(job.config, cpus, gpus > 0, shipped)] = job.id
            on_start(job.id)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            job_id = pending.pop(ready[0])
            try:
                yield job_id, ray.get(ready[0])
            except ray.exceptions.RayTaskError:  # the job raised (a full disk): stops the sweep, as locally
                raise
            except ray.exceptions.RayError as e:  # its worker or node died, and every retry of it too
                why = str(e).strip().splitlines()[0] if str(e).strip() else ""
                yield job_id, {"files": {}, "summary": None, "wall_s": 0.0, "lost": True,
                               "error": f"lost after {SYSTEM_RETRIES} retries: {type(e).__name__}: {why}"}


def cluster_nodes() -> list:
    """The live nodes of the connected Ray cluster, with the GPUs and CPUs each declares."""
    ray = require_extra("ray")

    return [Node(f"{n['NodeManagerAddress']} (node {n['NodeID'][:12]})", n["Resources"].get("GPU", 0.0),
                 n["Resources"].get("CPU", 0.0)) for n in ray.nodes() if n.get("Alive")]


def _auto_address() -> str:
    """The HOST:PORT ``ray.init(address="auto")`` would join (``RAY_ADDRESS``, else the cluster the last
    ``ray start`` recorded, else a Ray process found running here), as Ray itself resolves it."""
    require_extra("ray")
    from ray._private.services import canonicalize_bootstrap_address

    try:
        return canonicalize_bootstrap_address("auto")
    except (ConnectionError, ValueError) as e:
        raise ConfigError(f"invalid address='auto': no Ray cluster to join ({str(e).splitlines()[0]}); start one "
                          f"with `ray start --head`, or use --address local") from None


def _check_reachable(address: str, given: str | None = None) -> None:
    """Refuse at once a HOST:PORT (or ray://HOST:PORT) where nothing accepts connections: ``ray.init`` would
    otherwise keep retrying for minutes. ``given``: the address as the user gave it (e.g. ``auto``)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    require(bool(sep and host) and port.isascii() and port.isdigit(), "address", address,
            "HOST:PORT of a Ray cluster, auto, or local")  # ASCII digits: '²' passes isdigit, then fails int
    where = f"{given!r}: it names {address}, where" if given else f"{address!r}:"
    try:
        grpc = _speaks_grpc(host.strip("[]"), int(port))
    except OSError as e:
        raise ConfigError(f"invalid address={where} no Ray cluster answers ({e.strerror or type(e).__name__}; a "
                          f"stale record of a stopped cluster? start one with `ray start --head`, or use "
                          f"--address local)") from None
    if not grpc:
        raise ConfigError(f"invalid address={where} something other than a Ray cluster listens (it does not "
                          "answer as Ray's gRPC server does; the dashboard's port is not the cluster's: give the "
                          "port `ray start --head` printed, 6379 by default)")


# The HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (Ray's GCS, Ray Client) answers with a
# SETTINGS frame of its own (frame type 4 in the 4th byte of its 9-byte header); an HTTP/1 server, a database
# or anything else does not, and ray.init would wait on it for minutes
HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def _speaks_grpc(host: str, port: int) -> bool:
    """Whether the server at ``host:port`` answers the HTTP/2 preface as a gRPC server does (``OSError`` where
    nothing accepts the connection); within ``CONNECT_TIMEOUT_S``."""
    with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
        conn.sendall(HTTP2_HELLO)
        head = b""
        try:
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    return len(head) == 9 and head[3] == 4


def make_executor(name: str, workers: int = 1, address: str | None = None, resources: Resources = Resources(),
                  ship_data: bool = False):
    """The executor called ``name`` (``local`` or ``ray``), its jobs asking for ``resources``; ``ship_data``:
    the tasks' arrays sent through Ray's object store (:mod:`stabkit.sweep.shipping`)."""
    require(name in EXECUTORS, "executor", name, f"one of {', '.join(EXECUTORS)}")
    if name == "ray":
        require(address is not None, "address", address, "--address HOST:PORT, auto or local for --executor ray")
        return RayExecutor(address, resources, ship_data)
    require(not ship_data, "ship_data", ship_data, "only with --executor ray (it sends the data through Ray's "
            "object store; the local executor reads the files itself)")
    require(address is None, "address", address, "only with --executor ray (the local executor runs jobs in "
            "processes of this machine); add --executor ray, or leave --address out")
    return LocalExecutor(workers, resources)
