"""The Ray executor: a sweep on a local Ray cluster (started here, reached by address) gives per-job metrics
identical to the local executor, plug-in algorithms included (each Ray worker imports the example plug-in,
installed in a throw-away directory, itself); the cluster is stopped at the end. ``--address local`` starts a
fresh instance whatever an old ``ray start`` recorded, ``auto`` refuses at once the dead cluster a stale record
names, and no test leaves a Ray instance or a stale record behind. Ray must be installed (test extras)."""
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import ray  # a missing Ray is a failure, not a skip: it is in the test extras

from stabkit.sweep import make_executor, parse_spec, run_sweep
from stabkit.sweep.executors import _check_reachable
from tests.cli.test_bad_inputs import check_refused
from tests.sweep.test_sweep import BASE, metrics

SPEC = {"base": BASE, "product": {"algo": ["fedavg", "fedyogi"], "lr": [0.05, 0.1], "seed": [0, 1]}}


@pytest.fixture
def ray_tmpdir(monkeypatch):
    """A private Ray temp directory for the test (short: Ray's socket paths must fit in 107 bytes): the Ray
    instances it starts and their address record stay out of /tmp/ray and are removed with it. Token
    authentication off: a fresh local instance would otherwise write ~/.ray/auth_token, which every later
    `ray start --head` on the machine then requires of drivers that join by address."""
    root = Path(tempfile.mkdtemp(prefix="skray-", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(root))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield root
    assert not ray.is_initialized(), "the sweep left its Ray driver connected"
    shutil.rmtree(root, ignore_errors=True)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stale_record(root: Path) -> str:
    """The address record a `ray start --head` leaves behind when its head is killed: a dead 127.0.0.1 port."""
    address = f"127.0.0.1:{_closed_port()}"
    (root / "ray").mkdir(exist_ok=True)
    (root / "ray" / "ray_current_cluster").write_text(address)
    return address


def test_ray_cluster_matches_local_executor(tmp_path, fedyogi, ray_tmpdir):
    ray_cli = Path(sys.executable).with_name("ray")
    log = tmp_path / "head.log"
    port = _closed_port()
    env = {**fedyogi.env, "RAY_TMPDIR": str(ray_tmpdir), "RAY_AUTH_MODE": "disabled"}
    with open(log, "w") as f:  # the head and its workers have the example plug-in installed, as the driver has
        head = subprocess.Popen([str(ray_cli), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                                 f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                                 "--disable-usage-stats"], stdout=f, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 120
        while "Ray runtime started" not in log.read_text():  # the head takes a few seconds to come up
            assert head.poll() is None and time.time() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        assert (ray_tmpdir / "ray" / "ray_current_cluster").read_text().endswith(f":{port}")  # not /tmp/ray's
        driver = (f"from tests.sweep.test_sweep_ray import local_and_ray_sweeps; "
                  f"local_and_ray_sweeps({str(tmp_path)!r}, {port})")
        done = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, env=env)
        assert done.returncode == 0 and done.stdout.endswith("done\n"), done.stderr[-3000:]
    finally:
        head.terminate()
        head.wait(timeout=60)


def local_and_ray_sweeps(tmp, port: int):
    """The driver, run where the example plug-in is installed: the sweep on the local executor and on the
    cluster, and their comparison."""
    tmp_path = Path(tmp)
    run_sweep(parse_spec(SPEC), tmp_path / "local", make_executor("local"))
    started = []
    man = run_sweep(parse_spec(SPEC), tmp_path / "ray", make_executor("ray", address=f"127.0.0.1:{port}"),
                    progress=lambda ev, job, m, info: started.append(job) if ev == "running" else None)
    assert man.counts()["done"] == 8 and len(started) == 8
    assert metrics(tmp_path / "ray") == metrics(tmp_path / "local") and len(metrics(tmp_path / "local")) == 8
    assert not ray.is_initialized()  # the driver disconnected
    print("done")


def test_address_local_starts_a_fresh_instance_whatever_a_stale_record_names(tmp_path, ray_tmpdir):
    """`ray.init(address=None)` would join the dead cluster the record names and retry for minutes."""
    _stale_record(ray_tmpdir)
    spec = {"base": BASE, "product": {"seed": [0, 1]}}
    man = run_sweep(parse_spec(spec), tmp_path / "ray", make_executor("ray", address="local"))
    assert man.counts()["done"] == 2
    run_sweep(parse_spec(spec), tmp_path / "local", make_executor("local"))
    assert metrics(tmp_path / "ray") == metrics(tmp_path / "local")


def test_address_auto_refuses_the_dead_cluster_a_stale_record_names_at_once(tmp_path, capsys, monkeypatch,
                                                                           ray_tmpdir):
    import ray._private.services as services

    monkeypatch.setattr(services, "find_gcs_addresses", lambda: [])  # Ray processes of other programs here
    args = ["sweep", "--out", "sw", "--axis", "seed=0,1", "--executor", "ray", "--address", "auto"]
    check_refused(args, "invalid address='auto': no Ray cluster to join", tmp_path, capsys, monkeypatch, max_s=30)
    address = _stale_record(ray_tmpdir)
    port = address.rpartition(":")[2]  # Ray names 127.0.0.1 by this machine's address
    check_refused(args, "invalid address='auto': it names ", tmp_path, capsys, monkeypatch, max_s=30)
    check_refused(args, f":{port}, where no Ray cluster answers", tmp_path, capsys, monkeypatch, max_s=30)
    port = _closed_port()
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")  # RAY_ADDRESS wins over the record, as in ray.init
    check_refused(args, f":{port}, where no Ray cluster answers", tmp_path, capsys, monkeypatch, max_s=30)


def _default_record():
    """The record `ray.init(address="auto")` reads by default, as (path, its content and mtime or None)."""
    from ray._common.utils import get_ray_address_file

    path = Path(get_ray_address_file(None))
    return path, ((path.read_text(), path.stat().st_mtime) if path.exists() else None)


BEFORE = _default_record()[1]  # at collection, before this module's Ray tests: another program's is not ours


def test_no_stale_ray_cluster_record_is_left_behind():
    """Runs after the Ray tests above: the record `ray.init(address="auto")` reads is absent, as it was before
    them, or names a live head (a Ray instance a test started and did not stop would be found here)."""
    path, now = _default_record()
    if now is not None and now != BEFORE:
        _check_reachable(path.read_text().strip())
