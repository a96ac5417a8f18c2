"""Sweeps on a Ray cluster of more than one node, for real on this machine: a head (2 CPUs, no GPU) and a node
declaring two fake GPUs (``--num-gpus=2``: Ray assigns their ids and sets ``CUDA_VISIBLE_DEVICES``; torch sees
no CUDA, so a job records the GPU it was given and runs on the CPU), each a ``ray start --block`` process, and
the driver (``stabkit sweep --executor ray``) a separate process. All of them run in a fresh network namespace
that has only loopback (``unshare -n``; a driver joining 127.0.0.1 would otherwise dial the machine's own
interface address), so every connection stays on 127.0.0.1; where no namespace can be made (not root, no
``unshare``), the tests skip and say why.

One cluster serves the module (Ray's start-up is slow on small machines). The fake-GPU node runs in its own
mount namespace too, where the data folder is an empty tmpfs: a job there misses the data file that the head
sees. The node-fault test adds a third node and ends its raylet by pid mid-sweep."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

RAY = Path(sys.executable).with_name("ray")
PORT = 6379  # free in a fresh namespace
ADDRESS = f"127.0.0.1:{PORT}"
TINY = ["--set", "task=quadratic", "--set", "pairs=2", "--set", "clients=4",
        "--set", "heldout_clients=2", "--set", "local_rounds=[]", "--set", "constants=false", "--quiet"]
TIMEOUT_S = 300
STORE = 100_000_000  # the fake-GPU node's object store (bytes): --ship-data refuses a task above half of it


class LoopbackCluster:
    """Ray nodes and drivers in one network namespace with only loopback (held by a ``sleep`` process)."""

    def __init__(self, root: Path):
        self.root, self.data = root, root / "data"
        self.data.mkdir()
        missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
        if missing:
            pytest.skip(f"no network namespace can be made here: {', '.join(missing)} not installed (util-linux, "
                        f"iproute2)")
        self.holder = subprocess.Popen(["unshare", "-n", "sh", "-c", "ip link set lo up && echo up && exec sleep 3600"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if self.holder.stdout.readline().strip() != "up":
            why = self.holder.stderr.read().strip().splitlines()
            self.holder.wait()
            pytest.skip(f"no network namespace with only loopback can be made here ({why[-1] if why else '?'})")
        self.enter = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net"]
        self.env = {**os.environ, "RAY_TMPDIR": str(root), "RAY_AUTH_MODE": "disabled", "OMP_NUM_THREADS": "1"}
        self.env.pop("RAY_ADDRESS", None)
        self.nodes: dict = {}

    def start(self, name: str, *args: str, hidden: Path | None = None) -> str:
        """Start node ``name`` (``ray start --block ARGS``; ``hidden``: a folder that is empty on it) and return
        its node id."""
        log = self.root / f"{name}.log"
        command = [str(RAY), "start", "--block", "--node-ip-address=127.0.0.1", "--disable-usage-stats", *args]
        if hidden is not None:  # its own mount namespace: an empty tmpfs over the folder
            command = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs none "{hidden}" && exec "$@"', "-", *command]
        with open(log, "w") as f:
            proc = subprocess.Popen([*self.enter, *command], stdout=f, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + TIMEOUT_S
        while "Ray runtime started" not in log.read_text():
            assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        self.nodes[name] = proc
        return self.node_id(name)

    def raylet(self, name: str) -> int:
        """The pid of node ``name``'s raylet."""
        return next(p for p in descendants(self.nodes[name].pid) if _read(f"/proc/{p}/comm").strip() == "raylet")

    def node_id(self, name: str) -> str:
        args = _read(f"/proc/{self.raylet(name)}/cmdline").split("\0")
        return next(a for a in args if a.startswith("--node_id=")).partition("=")[2]

    def stabkit(self, *args: str, wait: bool = True):
        """``stabkit ARGS`` as a driver in the namespace (a finished process, or the running one)."""
        command = [*self.enter, sys.executable, "-m", "stabkit_cli", *args]
        if not wait:
            return subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=TIMEOUT_S)

    def sweep(self, out: Path, *args: str, rounds: int = 3, wait: bool = True):
        """A sweep of tiny jobs (``rounds`` rounds on the quadratic) on the cluster."""
        return self.stabkit("sweep", "--out", str(out), "--executor", "ray", "--address", ADDRESS, *TINY,
                            "--set", f"rounds={rounds}", *args, wait=wait)

    def close(self):
        for name in reversed(list(self.nodes)):  # the head last
            proc = self.nodes[name]
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.holder.kill()
        self.holder.wait()


@pytest.fixture(scope="module")
def cluster():
    root = Path(tempfile.mkdtemp(prefix="skrc-", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    c = LoopbackCluster(root)
    try:
        c.head = c.start("head", "--head", f"--port={PORT}", "--num-cpus=2", "--num-gpus=0",
                         "--include-dashboard=false")
        # while the cluster has no GPU node: a job that asks for cuda is refused before anything starts
        c.no_gpu_node = c.sweep(root / "cuda", "--axis", "seed=0,1", "--set", "device=cuda")
        c.gpu = c.start("gpu", f"--address={ADDRESS}", "--num-cpus=6", "--num-gpus=2", f"--object-store-memory={STORE}",
                        hidden=c.data)
        yield c
    finally:
        c.close()
        shutil.rmtree(root, ignore_errors=True)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:  # the process has ended
        return ""


def descendants(pid: int) -> list:
    """The pids of ``pid``'s children, their children, ... (from /proc)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        text = _read(str(stat))
        if text:
            parents.setdefault(int(text.rpartition(")")[2].split()[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = parents.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def placements(out: Path) -> dict:
    return {p.parent.name: json.loads(p.read_text())["placement"] for p in sorted(out.glob("jobs/*/config.json"))}


def most_at_once(intervals: list) -> int:
    """The largest number of (start, end) intervals that overlap."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = best = 0
    for _, step in events:
        now += step
        best = max(best, now)
    return best


def test_a_cuda_job_is_refused_where_no_node_has_a_gpu(cluster):
    done = cluster.no_gpu_node
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith(
        "error: invalid device='cuda' (sweep job seed=0): no node has a GPU (nodes: 127.0.0.1 (node "), done.stderr
    assert not (cluster.root / "cuda").exists()  # nothing written


def test_a_sweep_spreads_over_both_nodes_and_every_result_comes_back(cluster, tmp_path):
    done = cluster.sweep(tmp_path / "ray", "--axis", "seed=0,1,2,3,4,5", "--set", "device=cpu")
    assert done.returncode == 0 and "6 done, 0 failed of 6 jobs" in done.stdout, done.stderr[-3000:]
    placed = placements(tmp_path / "ray")
    spread = {node: sum(p["node_id"] == node for p in placed.values()) for node in (cluster.head, cluster.gpu)}
    print(f"node spread of 6 jobs: head {spread[cluster.head]}, fake-GPU node {spread[cluster.gpu]}")
    assert min(spread.values()) >= 1 and sum(spread.values()) == 6
    assert all(p["gpu_ids"] == [] and p["device"] == "cpu" for p in placed.values())  # device cpu holds no GPU
    local = subprocess.run([sys.executable, "-m", "stabkit_cli", "sweep", "--out", str(tmp_path / "local"), "--axis",
                            "seed=0,1,2,3,4,5", "--set", "device=cpu", "--set", "rounds=3", *TINY], env=cluster.env, capture_output=True)
    assert local.returncode == 0
    for job in placed:  # the run folders travelled back as bytes: the same metrics as on this machine
        assert (tmp_path / "ray" / "jobs" / job / "metrics.csv").read_bytes() == \
            (tmp_path / "local" / "jobs" / job / "metrics.csv").read_bytes()


def test_half_a_gpu_per_job_runs_at_most_four_jobs_on_two_gpus(cluster, tmp_path):
    done = cluster.sweep(tmp_path / "s", "--axis", "seed=0,1,2,3,4,5,6,7", "--gpus-per-job", "0.5", rounds=300)
    # (jobs of a few seconds: they overlap though the workers start one after another on a busy machine)
    assert done.returncode == 0 and "8 done" in done.stdout, done.stderr[-3000:]
    placed = placements(tmp_path / "s").values()
    assert {p["node_id"] for p in placed} == {cluster.gpu}  # the only node with GPUs (it has 6 CPUs)
    assert sorted({tuple(p["gpu_ids"]) for p in placed}) == [(0,), (1,)] and {p["device"] for p in placed} == {"cpu"}
    at_once = most_at_once([(p["start"], p["end"]) for p in placed])
    per_gpu = [most_at_once([(p["start"], p["end"]) for p in placed if p["gpu_ids"] == [g]]) for g in (0, 1)]
    print(f"--gpus-per-job 0.5 on 2 fake GPUs: at most {at_once} jobs at once, per GPU {per_gpu}")
    assert 2 <= at_once <= 4 and max(per_gpu) <= 2


def npz_sweep(cluster, out: Path, name: str, *args: str, samples: int = 40, features: int = 3, ray: bool = True):
    """A sweep of 6 jobs on the npz task whose file (6 clients, ``samples`` samples of ``features`` each) only
    the head (and this driver) sees: the fake-GPU node has an empty folder there. ``(path, finished process)``."""
    rng = np.random.default_rng(0)
    path = cluster.data / name
    np.savez(path, x=rng.normal(size=(6 * samples, features)).astype(np.float32),
             y=rng.integers(0, 2, 6 * samples), client=np.repeat(np.arange(6), samples))
    sets = ["task=npz", f"npz_path={path}", "rounds=2", "pairs=2", "clients=4", "heldout_clients=2", "local_rounds=[]",
            "constants=false", "device=cpu"]
    executor = ["--executor", "ray", "--address", ADDRESS] if ray else []
    return path, cluster.stabkit("sweep", "--out", str(out), *executor, "--axis", "seed=0,1,2,3,4,5", "--quiet",
                                 *(a for kv in sets for a in ("--set", kv)), *args)


def test_a_job_missing_its_data_on_its_node_fails_naming_node_and_path(cluster, tmp_path):
    path, done = npz_sweep(cluster, tmp_path / "s", "clients.npz")
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())["jobs"]
    failed = {j: r["error"] for j, r in manifest.items() if r["state"] == "failed"}
    done_jobs = [j for j, r in manifest.items() if r["state"] == "done"]
    assert failed and done_jobs and len(failed) + len(done_jobs) == 6, manifest  # the others went on
    assert {p["node_id"] for p in placements(tmp_path / "s").values()} == {cluster.head}
    for why in failed.values():
        assert why.startswith(f"on node {cluster.gpu} (") and str(path) in why and "\n" not in why, why
    last = done.stderr.strip().splitlines()[-1]  # (before it: the lines Ray itself prints as a driver connects)
    assert done.returncode == 2 and last.startswith("error: ") and f"on node {cluster.gpu}" in last


def test_ship_data_sends_the_arrays_to_a_node_that_lacks_the_files(cluster, tmp_path):
    _, done = npz_sweep(cluster, tmp_path / "s", "shipped.npz", "--ship-data")
    assert done.returncode == 0 and "6 done, 0 failed of 6 jobs" in done.stdout, done.stderr[-3000:]
    assert {p["node_id"] for p in placements(tmp_path / "s").values()} == {cluster.head, cluster.gpu}
    _, local = npz_sweep(cluster, tmp_path / "local", "shipped.npz", ray=False)
    assert local.returncode == 0
    for job in placements(tmp_path / "s"):  # the same numbers as from the files
        assert (tmp_path / "s" / "jobs" / job / "metrics.csv").read_bytes() == \
            (tmp_path / "local" / "jobs" / job / "metrics.csv").read_bytes()
    _, big = npz_sweep(cluster, tmp_path / "big", "big.npz", "--ship-data", samples=35_000, features=64)
    last = big.stderr.strip().splitlines()[-1]  # 210,000 samples x (64 float32 + an int64 label): 55 MB
    assert big.returncode == 2 and last.startswith("error: invalid ship_data=True: the arrays of task 'npz' (sweep job "
                                                   "seed=0) are ") and "MiB, above 48 MiB (50% of the smallest " \
                                                   "node's object store)" in last, big.stderr[-2000:]
    assert not (tmp_path / "big").exists()


def test_a_node_killed_mid_sweep_has_its_jobs_run_again_elsewhere(cluster, tmp_path):
    victim = cluster.start("victim", f"--address={ADDRESS}", "--num-cpus=2")
    out = tmp_path / "s"
    sweep = cluster.sweep(out, "--axis", "seed=0,1,2,3,4,5,6,7", "--set", "device=cpu", rounds=400, wait=False)
    raylet = cluster.raylet("victim")
    deadline = time.time() + TIMEOUT_S
    while not any("_ray_job" in _read(f"/proc/{p}/cmdline") for p in descendants(raylet)):  # a job runs there
        assert sweep.poll() is None and time.time() < deadline, sweep.communicate()
        time.sleep(0.1)
    killed_at = time.time()
    os.kill(raylet, 9)
    stdout, stderr = sweep.communicate(timeout=TIMEOUT_S)
    assert sweep.returncode == 0 and "8 done, 0 failed of 8 jobs" in stdout, stderr[-3000:]
    placed = placements(out)
    again = [j for j, p in placed.items() if p["attempt"] >= 1]
    print(f"victim's raylet killed: {len(again)} job(s) run again elsewhere ({', '.join(again)}); on the victim "
          f"before: {sum(p['node_id'] == victim for p in placed.values())}")
    assert again and all(placed[j]["node_id"] != victim and placed[j]["start"] > killed_at for j in again)
    assert all(p["end"] < killed_at for p in placed.values() if p["node_id"] == victim)
    rerun = cluster.sweep(out, "--axis", "seed=0,1,2,3,4,5,6,7", "--set", "device=cpu", rounds=400)
    assert rerun.returncode == 0 and "8 done" in rerun.stdout and placements(out) == placed  # nothing left to run
