"""Where sweep jobs run: the GPUs each job holds by device and ``--gpus-per-job``, the check that a node fits
every job, the local pool's round-robin GPU assignment (set before a worker initialises CUDA), and the
``placement`` each job's config.json records (ignored when the config is read back, so a sweep resumes)."""
import json
import multiprocessing
import os

import pytest

from stabkit.errors import ConfigError
from stabkit.sweep import executors, make_executor, parse_spec, run_sweep
from stabkit.sweep.manifest import recover_jobs
from stabkit.sweep.placement import Node, Resources, plan_gpus
from tests.sweep.test_sweep import BASE, metrics

SPEC = {"base": dict(BASE, rounds=2), "product": {"seed": [0, 1]}}


def test_gpus_a_job_holds_by_device():
    default, half = Resources(), Resources(gpus=0.5)
    assert [default.gpus_for(d, True) for d in ("cpu", "cuda", "cuda:1", "auto")] == [0, 1, 1, 1]
    assert [default.gpus_for(d, False) for d in ("cpu", "cuda", "auto")] == [0, 1, 0]  # auto on a CPU cluster
    assert [half.gpus_for(d, True) for d in ("cpu", "cuda", "auto")] == [0, 0.5, 0.5]  # cpu holds none


def test_a_job_is_planned_only_on_a_node_that_fits_it():
    jobs = parse_spec({"base": dict(BASE, device="auto"), "product": {"seed": [0, 1]}}).jobs()
    nodes = [Node("head", 0, 8), Node("gpu", 2, 4)]
    assert set(plan_gpus(jobs, Resources(gpus=0.25), nodes).values()) == {0.25}
    assert set(plan_gpus(jobs, Resources(gpus=2), nodes).values()) == {2}
    with pytest.raises(ConfigError, match=r"invalid gpus_per_job=3: no node fits sweep job seed=0, which asks "
                                          r"for 3 GPU\(s\) and 1 CPU\(s\) \(nodes: head: 0 GPU\(s\), 8 CPU\(s\), gpu"):
        plan_gpus(jobs, Resources(gpus=3), nodes)
    with pytest.raises(ConfigError, match=r"invalid cpus_per_job=6: no node fits"):  # the GPU node has 4 CPUs
        plan_gpus(jobs, Resources(cpus=6), nodes)
    cuda = parse_spec({"base": dict(BASE, device="cuda"), "product": {"seed": [0]}}).jobs()
    with pytest.raises(ConfigError, match=r"invalid device='cuda' \(sweep job seed=0\): no node has a GPU"):
        plan_gpus(cuda, Resources(), [Node("head", 0, 8)])


def test_an_executor_checks_the_data_only_where_its_workers_read_this_machines_files():
    """The local executor and Ray on ``local``/``auto`` or with ``ship_data`` (arrays built here) refuse a job
    that fails its run's checks; a remote cluster's nodes read their own files, so only the requests are
    checked. ``check`` opens no connection: the executors are built without the constructor's reachability
    check."""
    jobs = parse_spec({"base": dict(BASE, samples_per_client=10, batch_size=11), "product": {"seed": [0]}}).jobs()
    bad_batch = r"^invalid batch_size=11: .*\(sweep job seed=0\)$"
    with pytest.raises(ConfigError, match=bad_batch):
        make_executor("local").check(jobs)

    def ray(address, ship_data=False):
        ex = object.__new__(executors.RayExecutor)
        ex.address, ex.resources, ex.ship_data = address, Resources(), ship_data
        return ex

    for checked in (ray("local"), ray("auto"), ray("127.0.0.1:1", ship_data=True)):
        with pytest.raises(ConfigError, match=bad_batch):
            checked.check(jobs)
    ray("127.0.0.1:1").check(jobs)  # a remote cluster: its own data, not checked here
    remote = ray("127.0.0.1:1")
    remote.resources = Resources(gpus=0)
    with pytest.raises(ConfigError, match=r"invalid gpus_per_job=0: sweep job seed=0 runs on device 'cuda'"):
        remote.check(parse_spec({"base": dict(BASE, device="cuda"), "product": {"seed": [0]}}).jobs())


@pytest.mark.parametrize("share,gpus,expected", [
    (1.0, 4, [[0], [1], [2], [3]]),          # one GPU a worker, round-robin
    (0.5, 2, [[0], [1], [0], [1]]),          # two workers a GPU
    (2.0, 4, [[0, 1], [2, 3]]),              # two GPUs a worker
])
def test_local_pool_gives_workers_gpus_round_robin_by_fraction(monkeypatch, share, gpus, expected):
    counter = multiprocessing.get_context("spawn").Value("i", 0)
    seen = []
    for _ in expected:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(4 + i) for i in range(gpus)))  # mapped through
        executors._start_worker(counter, share, gpus)
        seen.append((list(executors._WORKER_GPUS), os.environ["CUDA_VISIBLE_DEVICES"]))
    assert seen == [([4 + i for i in ids], ",".join(str(4 + i) for i in ids)) for ids in expected]
    assert executors._gpu_slots(gpus, share) == len(expected)


def test_each_job_records_where_it_ran_and_still_resumes(tmp_path):
    man = run_sweep(parse_spec(SPEC), tmp_path / "pool", make_executor("local", workers=2))
    assert man.counts()["done"] == 2
    for job in parse_spec(SPEC).jobs():
        config = json.loads((tmp_path / "pool" / "jobs" / job.id / "config.json").read_text())
        placed = config["placement"]
        assert placed["node_id"] is None and placed["gpu_ids"] == [] and placed["device"] == "cpu"
        assert placed["host"] == os.uname().nodename and placed["start"] < placed["end"]
        assert config["device"] == "auto"  # the job's own device, though it held no GPU and ran on the CPU
    recovered = recover_jobs(tmp_path / "pool", parse_spec(SPEC).jobs())  # the placement is a fact, not config
    assert {r["state"] for r in recovered.values()} == {"done"} and len(recovered) == 2
    run_sweep(parse_spec(SPEC), tmp_path / "one", make_executor("local"))
    assert metrics(tmp_path / "one") == metrics(tmp_path / "pool")


def test_cpus_per_job_sets_the_jobs_torch_threads(tmp_path, monkeypatch):
    import torch

    import stabkit.run.experiment as experiment

    seen = []

    def run_pair(cfg, out, task=None):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stop")

    monkeypatch.setattr(experiment, "run_pair", run_pair)
    for cpus in (1, 2):
        man = run_sweep(parse_spec(SPEC), tmp_path / str(cpus), make_executor("local", resources=Resources(cpus=cpus)))
        assert man.counts()["failed"] == 2
    assert seen == [1, 1, 2, 2]


class LosesFirstJob(executors.LocalExecutor):
    """The local executor, except that its first job is lost as a job is when its node dies for good."""

    def run(self, jobs, on_start):
        for k, (job_id, result) in enumerate(super().run(jobs, on_start)):
            yield job_id, ({"files": {}, "summary": None, "wall_s": 0.0, "lost": True,
                            "error": "lost after 2 retries: NodeDiedError: gone"} if k == 0 else result)


def test_a_job_lost_with_its_node_is_left_for_the_rerun(tmp_path, capsys, monkeypatch):
    from tests.helpers import cli

    monkeypatch.setattr(executors, "LocalExecutor", LosesFirstJob)
    args = ["sweep", "--out", str(tmp_path / "s"), "--axis", "seed=0,1", "--set", "task=quadratic", "--set",
            "rounds=2", "--set", "quad_dim=4", "--quiet"]
    code, out, err = cli(args, capsys)
    assert code == 1 and "1 of 2 jobs were lost with their node (lost after 2 retries: NodeDiedError: gone); run " \
                          "the same command again to run them" in out, (out, err)
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())["jobs"]
    assert [r["state"] for r in manifest.values()] == ["pending", "done"]
    monkeypatch.undo()
    code, out, _ = cli(args, capsys)
    assert code == 0 and "2 done, 0 failed of 2 jobs" in out
    assert {r["state"] for r in json.loads((tmp_path / "s" / "manifest.json").read_text())["jobs"].values()} == {"done"}
