"""The Ray executor: a sweep on a local Ray cluster (started here, reached by address) gives per-job metrics
identical to the local executor, plug-in algorithms included (each Ray worker imports the example plug-in,
installed in a throw-away directory, itself); the cluster is stopped at the end. Ray must be installed (test extras)."""
import subprocess
import sys
import time
from pathlib import Path

import ray  # a missing Ray is a failure, not a skip: it is in the test extras

from stabkit.sweep import make_executor, parse_spec, run_sweep

from tests.test_sweep import BASE, metrics

PORT = 63791
SPEC = {"base": BASE, "product": {"algo": ["fedavg", "fedyogi"], "lr": [0.05, 0.1], "seed": [0, 1]}}


def test_ray_cluster_matches_local_executor(tmp_path, fedyogi):
    ray_cli = Path(sys.executable).with_name("ray")
    log = tmp_path / "head.log"
    with open(log, "w") as f:  # the head and its workers have the example plug-in installed, as the driver has
        head = subprocess.Popen([str(ray_cli), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
                                 f"--port={PORT}", "--num-cpus=2", "--include-dashboard=false",
                                 "--disable-usage-stats"], stdout=f, stderr=subprocess.STDOUT, env=fedyogi.env)
    try:
        deadline = time.time() + 120
        while "Ray runtime started" not in log.read_text():  # the head takes a few seconds to come up
            assert head.poll() is None and time.time() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        driver = f"from tests.test_sweep_ray import local_and_ray_sweeps; local_and_ray_sweeps({str(tmp_path)!r})"
        assert fedyogi.run(["-c", driver]).endswith("done\n")
    finally:
        head.terminate()
        head.wait(timeout=60)


def local_and_ray_sweeps(tmp):
    """The driver, run where the example plug-in is installed: the sweep on the local executor and on the
    cluster, and their comparison."""
    tmp_path = Path(tmp)
    run_sweep(parse_spec(SPEC), tmp_path / "local", make_executor("local"))
    started = []
    man = run_sweep(parse_spec(SPEC), tmp_path / "ray", make_executor("ray", address=f"127.0.0.1:{PORT}"),
                    progress=lambda ev, job, m, info: started.append(job) if ev == "running" else None)
    assert man.counts()["done"] == 8 and len(started) == 8
    assert metrics(tmp_path / "ray") == metrics(tmp_path / "local") and len(metrics(tmp_path / "local")) == 8
    assert not ray.is_initialized()  # the driver disconnected
    print("done")
