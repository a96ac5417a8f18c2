"""Executors: where a sweep's jobs run. Each yields ``(job_id, result)`` as jobs finish.

* ``local`` (default): in this process, one job after another; with ``workers > 1`` a pool of spawned
  processes. Every job already batches all its pairs (and clients) into one tensor program, so a pool
  only helps when cores are idle; results are identical either way (see :mod:`stabkit.sweep.job`).
* ``ray``: Ray tasks (one CPU each) on an existing cluster (``address="HOST:PORT"`` or ``"auto"``), or on
  a fresh Ray instance started for the sweep and stopped after it (``address="local"``: never a cluster an
  earlier ``ray start`` recorded, which may be long gone). Before anything runs, the address a sweep would
  join (HOST:PORT, or for ``auto`` the one Ray would pick: ``RAY_ADDRESS``, else the last ``ray start``)
  must accept connections, so a dead cluster is refused at once instead of being retried for minutes. Ray
  is imported only here.

``on_start(job_id)`` is called when a job is handed to a worker, for progress reporting.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import socket
from typing import Callable, Iterator

from stabkit.engine import machine
from stabkit.errors import ConfigError, require
from stabkit.sweep import EXECUTORS
from stabkit.sweep.job import execute_job

CONNECT_TIMEOUT_S = 3.0  # a cluster address that does not answer within this is refused before the sweep starts


class LocalExecutor:
    """Jobs in this process (``workers=1``) or in a process pool."""

    def __init__(self, workers: int = 1):
        require(isinstance(workers, int) and workers >= 1, "workers", workers, "a positive integer")
        self.workers = workers
        self.shares_files = True

    def run(self, jobs: list, on_start: Callable) -> Iterator:
        if self.workers == 1:
            for job in jobs:
                on_start(job.id)
                yield job.id, execute_job(job.config)
            return
        ctx = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
        with cf.ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=machine.apply) as pool:
            futures = {}
            for job in jobs:
                futures[pool.submit(execute_job, job.config)] = job.id
                on_start(job.id)
            for fut in cf.as_completed(futures):
                yield futures[fut], fut.result()


class RayExecutor:
    """Jobs as Ray tasks on a cluster reached by ``address`` (HOST:PORT, auto, or local)."""

    def __init__(self, address: str):
        require(bool(address), "address", address, "HOST:PORT of a Ray cluster, auto, or local")
        if address == "auto":
            _check_reachable(_auto_address(), "auto")
        elif address != "local":
            _check_reachable(address)
        self.address = address
        self.shares_files = address in ("auto", "local")  # a remote cluster may hold data we do not see

    def run(self, jobs: list, on_start: Callable) -> Iterator:
        try:
            import ray
        except ImportError:
            raise ConfigError("invalid executor='ray': Ray is not installed (pip install ray)") from None
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
            task = ray.remote(num_cpus=1, max_retries=0)(execute_job)
            pending = {}
            for job in jobs:
                pending[task.remote(job.config)] = job.id
                on_start(job.id)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                ref = ready[0]
                yield pending.pop(ref), ray.get(ref)
        finally:
            ray.shutdown()


def _auto_address() -> str:
    """The HOST:PORT ``ray.init(address="auto")`` would join (``RAY_ADDRESS``, else the cluster the last
    ``ray start`` recorded, else a Ray process found running here), as Ray itself resolves it."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:
        raise ConfigError("invalid executor='ray': Ray is not installed (pip install ray)") from None
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


def make_executor(name: str, workers: int = 1, address: str | None = None):
    """The executor called ``name`` (``local`` or ``ray``)."""
    require(name in EXECUTORS, "executor", name, f"one of {', '.join(EXECUTORS)}")
    if name == "ray":
        require(address is not None, "address", address, "--address HOST:PORT, auto or local for --executor ray")
        return RayExecutor(address)
    require(address is None, "address", address, "only with --executor ray (the local executor runs jobs in "
            "processes of this machine); add --executor ray, or leave --address out")
    return LocalExecutor(workers)
