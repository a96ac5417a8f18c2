"""The atlas's projected time: the calibration job's times scaled to the suite's jobs, plus what reading and
analysing each job for the page costs (hand-computed from a fixed calibration result)."""
import types

import pytest

import stabkit.atlas.estimate as estimate
import stabkit.sweep.job as job_module


def test_projection_scales_training_and_evaluation_and_adds_the_fixed_and_reading_costs(monkeypatch):
    metrics = b"round,pair,disc,train_loss_a\n0,0,0,1\n1,0,0.1,0.9\n2,0,0.2,0.8\n"
    result = {"error": None, "wall_s": 5.0, "files": {"metrics.csv": metrics},
              "summary": {"time": {"train_s": 2.0, "eval_s": 1.5}}}
    # FedSAM's calibration trains twice as long and costs 1 s more beyond training and evaluation
    sam = {**result, "wall_s": 8.0, "summary": {"time": {"train_s": 4.0, "eval_s": 1.5}}}
    monkeypatch.setattr(job_module, "execute_job", lambda config: sam if config["algo"] == "fedsam" else result)
    monkeypatch.setattr(estimate, "_reading_seconds", lambda files: 0.25)
    monkeypatch.setattr(estimate, "parallel_capacity", lambda workers: 1.25)
    config = dict(task="quadratic", perturb="client", pairs=2, rounds=16, local_steps=5, eval_every=None,
                  algo="fedavg")
    jobs = [types.SimpleNamespace(config=config)] * 3 + [types.SimpleNamespace(config=dict(config, algo="fedsam"))]
    out = estimate.projected_seconds(jobs, workers=2)
    # training: 2.0 s / 2 rounds x 5 / 2 local steps x 16 rounds = 40 s; evaluation: 1.5 s / 3 evaluated rounds x
    # 17 = 8.5 s; fixed: 5.0 - 2.0 - 1.5 = 1.5 s
    assert out["per_job"][("quadratic", "client", 2)] == pytest.approx(40 + 8.5 + 1.5)
    assert out["algo_factor"] == {"fedavg": 1.0, "fedsam": 2.0}
    # FedSAM's job: FedAvg's + (2 - 1) x 40 s of training + (2.5 - 1.5) s fixed; the sum over 1.25 jobs at
    # once, then reading the 4 jobs one after another (0.25 s each)
    assert out["total_s"] == pytest.approx((3 * 50 + 50 + 40 + 1.0) / 1.25 + 4 * 0.25)


def test_parallel_capacity_is_measured_and_at_most_the_workers():
    assert estimate.parallel_capacity(1) == 1.0
    capacity = estimate.parallel_capacity(2)
    assert 0.3 < capacity <= 2.0


def test_reading_a_calibration_job_is_timed_on_its_files(tmp_path):
    from stabkit import RunConfig, TaskOptions, run_pair

    run_pair(RunConfig(task="quadratic", pairs=1, rounds=3, constants=False,
                       task_options=TaskOptions(clients=4, heldout_clients=2, samples_per_client=20)), out=tmp_path / "r")
    files = {p.name: p.read_bytes() for p in (tmp_path / "r").iterdir() if p.is_file()}
    assert 0 < estimate._reading_seconds(files) < 30
