"""A tiny run of the throughput benchmark (benchmarks/run.py) so it cannot rot; no timing is asserted."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import run  # noqa: E402


def test_benchmark_smoke(tmp_path, capsys):
    out = tmp_path / "bench.json"
    run.main(["--only", "W1", "--scale", "0.1", "--reps", "1", "--json", str(out)])
    report = json.loads(out.read_text())
    (res,) = report["results"]
    assert res["workload"] == "W1" and res["flops_per_sample"] > 0 and res["gemm_peak_gflops"] > 0
    assert [(r["pairs"], r["threads"]) for r in res["rows"]] == [(1, 1), (8, 1), (1, 2), (8, 2)]
    best = res["baseline_best_threads"]
    assert res["baseline_rounds_per_s"][str(best)] == max(res["baseline_rounds_per_s"].values())
    assert set(res["gemm_peak_by_threads"]) == {"1", "2"}
    for row in res["rows"]:
        assert abs(row["traj_rounds_per_s"] / row["rounds_per_s"] - 2 * row["pairs"]) < 1e-9  # one rep: exact
        assert row["baseline_rounds_per_s"] > 0 and row["ratio"] > 0 and 0 < row["eval_fraction"] < 1
        assert row["baseline_threads"] == best  # every ratio is against the baseline at its best thread count
    assert set(res["scaling"]) == {"clients_per_round", "local_steps"}
    knobs = res["eval_knobs"]
    assert set(knobs) == {"eval_every_2", "eval_every_5", "eval_every_10", "eval_fraction_0.5",
                          "eval_fraction_0.25", "eval_fraction_0.1"}
    assert all(0 < v < 1 for v in knobs.values())
    assert knobs["eval_every_10"] < knobs["eval_every_5"] < knobs["eval_every_2"] < res["rows"][-1]["eval_fraction"]
    assert res["peak_rss_mb"] > 0
    ga = res["gradient_alone"]  # the round's ceiling: the largest pair count's gradient, at each thread count
    assert ga["pairs"] == 8 and set(ga) == {"pairs", "1", "2"}
    for n in ("1", "2"):
        assert ga[n]["s"] > 0 and abs(ga[n]["gflops"] / res["gemm_peak_by_threads"][n] - ga[n]["peak_fraction"]) < 1e-12
    printed = capsys.readouterr().out
    assert "the gradient alone (8 pairs' clients" in printed
    assert "traj-r/s" in printed and "W1" in printed and "exponent" in printed and "(1t)" in printed


def test_op_profile_smoke():
    from benchmarks.op_profile import profile_workload
    table = profile_workload("W1", pairs=1, rounds=1, device="cpu", rows=5)
    assert "Self CPU" in table and "aten::" in table


def test_chunks_benchmark_smoke(capsys):
    import stabkit.engine.paired as paired
    from benchmarks import chunks

    before = paired.CHUNK_BYTES
    chunks.main(["--pairs", "3", "--chunk-mib", "4096,1", "--rounds", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "(3 pairs)" in lines[0] and "page faults per round" in lines[1]
    assert paired.CHUNK_BYTES == before  # the engine's setting is put back


def test_flatness_benchmark_smoke(tmp_path):
    from benchmarks import flatness

    out = tmp_path / "flat.json"
    flatness.main(["--only", "mlp,surface", "--probes", "4", "--points", "3", "--samples", "100", "--out", str(out)])
    mlp, surface = json.loads(out.read_text())["cases"]
    assert mlp["relative_error"] < 0.01 and mlp["trace_se"] > 0 and mlp["lanczos_iterations"] >= 1
    assert surface["train_samples"] == 100 and surface["points"] == 3 and surface["surface_s"] > 0


def test_gpu_check_smoke(tmp_path, capsys):
    """The device check's logic on the CPU (no timing asserted): the CPU against itself agrees exactly."""
    from benchmarks import gpu_check

    out = tmp_path / "gpu_check.json"
    res = gpu_check.main(["--device", "cpu", "--scale", "0.1", "--reps", "1", "--no-estimates", "--json", str(out)])
    assert json.loads(out.read_text())["agreement"] == res["agreement"]
    assert [w["workload"] for w in res["workloads"]] == ["W4", "W5"] and set(res["peaks"]) == {"fp32"}
    assert all(0 < w["fp32"]["peak_fraction"] for w in res["workloads"])
    a = res["agreement"]
    assert a["float64_max_rel_diff"] == 0.0 and a["D_T_device"] == a["D_T_cpu"] > 0 and a["float32_ok"]
    assert "CPU == device, float64" in capsys.readouterr().out


def test_refusals_benchmark_smoke(tmp_path):
    """The refusal-time benchmark reads the suite's bad-input tables (tests/cli/test_bad_inputs.py) and times
    each case as a fresh ``stabkit`` process; every fourth case of the OTHER table, no timing asserted."""
    from benchmarks import refusals

    out = tmp_path / "refusals.json"
    report = refusals.main(["--tables", "other", "--every", "6", "--json", str(out)])
    assert report["cases"] >= 2 and report["clean"] == report["cases"], report["not_clean"]
    assert json.loads(out.read_text())["per_table_median_s"]["other"] > 0


def test_every_benchmark_script_imports():
    """The scripts no smoke test runs still import: a renamed function in stabkit or a test table moved to its
    room broke two of them silently before (long_runs.py, flower_differential.py)."""
    import importlib

    root = Path(__file__).resolve().parents[2] / "benchmarks"
    scripts = sorted(p.stem for p in root.glob("*.py"))
    assert len(scripts) > 15
    for name in scripts:
        importlib.import_module(f"benchmarks.{name}")
