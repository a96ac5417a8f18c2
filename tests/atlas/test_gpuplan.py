"""The projection onto N GPUs: the benchmark rows it reads (the repository's own GPU results), the row each
job's model size picks, the arithmetic of the scaling, and the line printed where no figures exist."""
import json
import math

import pytest

from stabkit.atlas.gpuplan import (
    BENCHMARKS,
    gpu_round_seconds,
    gpu_rows,
    project_on_gpus,
    projection_lines,
    rows_of_size,
)


def test_rows_read_from_the_repositorys_gpu_results():
    rows = gpu_rows()
    if not (BENCHMARKS / "results_cuda_h100.json").is_file():
        pytest.skip("no benchmarks/ folder beside the package (an installed copy)")
    cnn = [r for r in rows if r["d"] == 797962]
    # FedAvg CNN: benchmarks/run.py's W4 at 1 pair (s = 4, K = 2) and gpu_probe.py's at 8 pairs (4 clients, K = 2)
    assert {(r["pairs"], r["clients"], r["steps"], round(r["round_s"], 6)) for r in cnn} >= {
        (1, 4, 2, 0.008795), (8, 4, 2, 0.049959)}
    assert {r["d"] for r in rows_of_size(7850, rows)} == {4810}  # EMNIST-L logistic: the digits MLP is nearest


def test_a_step_is_interpolated_between_the_measured_batches():
    rows = [{"source": "b", "machine": "m", "what": "w", "d": 5, "pairs": p, "clients": 4, "steps": 2,
             "round_s": 2 * t} for p, t in ((1, 0.004), (8, 0.025))]  # a step of 4 and of 32 models
    job = {"pairs": 4, "clients": 4, "steps": 25}  # 16 models a step: between them, log-log
    seconds, used = gpu_round_seconds(job, rows)
    exponent = math.log(0.025 / 0.004) / math.log(32 / 4)
    assert seconds == pytest.approx(25 * 0.004 * 4 ** exponent) and len(used) == 2
    assert gpu_round_seconds(dict(job, pairs=16), rows)[0] == pytest.approx(25 * 0.025 * 2)  # above: linear
    assert gpu_round_seconds(dict(job, pairs=1, clients=1), rows)[0] == pytest.approx(25 * 0.004)  # below: floor


def test_scaling_arithmetic():
    rows = [{"source": "b.json", "machine": "m", "what": "w", "d": 1000, "pairs": 2, "clients": 4, "steps": 5,
             "round_s": 0.01}]
    job = {"d": 1200, "pairs": 4, "clients": 8, "steps": 5, "rounds": 100, "compute_s": 410.0, "train_s": 400.0,
           "fixed_s": 10.0}
    plan = project_on_gpus([job] * 4, reading_s=3.0, gpus=2, gpus_per_job=1, rows=rows)
    gpu_train = 0.01 * 4 * 100  # 32 models a step, 4x the row's 8 (above it: linear), 100 rounds: 4 s
    per_job = 10.0 + 400.0 / (400.0 / gpu_train)  # the fixed cost stays, the rest sped up alike
    assert plan["per_job_s"] == [pytest.approx(per_job)] * 4 and plan["speedup"] == {1200: pytest.approx(100.0)}
    assert plan["total_s"] == pytest.approx(4 * per_job / 2 + 3.0)
    half = project_on_gpus([job] * 4, 3.0, gpus=2, gpus_per_job=0.5, rows=rows)
    assert half["total_s"] == plan["total_s"]  # packing adds no arithmetic
    one = project_on_gpus([job], 3.0, gpus=8, gpus_per_job=1, rows=rows)
    assert one["total_s"] == pytest.approx(per_job + 3.0)  # never less than the longest job


def test_no_figures_no_projection(tmp_path):
    est = {"parts": [], "reading_s": 0.0}
    assert projection_lines(est, 8, None, folder=tmp_path) == [
        f"no GPU projection: no GPU benchmark results (results_gpu*.json, results_cuda_*.json) under {tmp_path}"]
    (tmp_path / "results_gpu_x.json").write_text(json.dumps({"machine": "GPU box", "results": [
        {"d": 10, "workload": "W", "pairs": 1, "clients": 1, "K": 1, "round_s": 0.001}]}))
    parts = [{"d": 10, "pairs": 1, "clients": 1, "steps": 1, "rounds": 10, "compute_s": math.nan, "train_s": 1.0,
              "fixed_s": 0.0}]
    assert projection_lines({"parts": parts, "reading_s": 0.0}, 8, None, folder=tmp_path) == [
        "no GPU projection: a calibration here failed (see above)"]


def test_sweep_estimate_projects_here_and_on_gpus_and_writes_nothing(tmp_path, capsys):
    from tests.helpers import cli

    code, out, err = cli(["sweep", "--out", str(tmp_path / "s"), "--axis", "seed=0,1", "--set", "task=quadratic",
                          "--set", "rounds=40", "--set", "pairs=2", "--estimate", "--gpus", "8"], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("sweep sweep: 2 jobs; projected "), (out, err)
    if (BENCHMARKS / "results_cuda_h100.json").is_file():  # the quadratic (d = 10) takes W1's row (d = 610)
        assert lines[1].startswith("on 8 GPU(s) at 1 GPU per job: projected ")
        assert "benchmarks/results_cuda_h100.json" in lines[2] and "d = 610" in lines[2]
        assert lines[-1].startswith("  training speed-up over this machine by model size: d = 10: ")
    assert not (tmp_path / "s").exists()
