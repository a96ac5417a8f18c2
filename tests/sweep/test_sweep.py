"""Sweeps: expansion and validation of specs, resumability, failures, kill-safety, the report."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from stabkit.errors import ConfigError
from stabkit.sweep import load_spec, make_executor, parse_spec, read_manifest, run_sweep
from stabkit.sweep.report import sweep_report
from stabkit_cli.main import main
from tests.helpers import cli

BASE = {"algo": "fedavg", "task": "quadratic", "rounds": 6, "pairs": 2, "clients": 4, "heldout_clients": 2,
        "local_steps": 2, "local_rounds": [], "constants": False, "quad_dim": 4}
GRID = {"base": BASE, "product": {"lr": [0.05, 0.1], "local_steps": [1, 2], "seed": [0, 1]}}


def sweep(spec_dict, out, **kw):
    """Run a sweep in-process; return the manifest and the ids of the jobs that were started."""
    started = []
    man = run_sweep(parse_spec(spec_dict), out, make_executor("local"),
                    progress=lambda ev, job, m, info: started.append(job) if ev == "running" else None, **kw)
    return man, started


def metrics(out) -> dict:
    return {p.parent.name: p.read_text() for p in sorted(Path(out, "jobs").glob("*/metrics.csv"))}


def test_grid_resume_redo_and_failure(tmp_path):
    out = tmp_path / "s"
    man, started = sweep(GRID, out)
    assert len(started) == 8 and man.counts() == {"pending": 0, "running": 0, "done": 8, "failed": 0}
    first = metrics(out)
    df = pd.read_csv(out / "jobs" / "lr=0.1,local_steps=2,seed=1" / "metrics.csv")
    assert df["round"].max() == 6 and df["pair"].nunique() == 2 and (df["disc"].iloc[2:] > 0).all()
    cfg = json.loads((out / "jobs" / "lr=0.1,local_steps=2,seed=1" / "config.json").read_text())
    assert (cfg["lr"], cfg["local_steps"], cfg["seed"], cfg["task_options"]["clients"]) == (0.1, 2, 1, 4)
    # a larger lr moves the pairs further apart: the sweep axes really reach the runs
    d = {j: read_manifest(out)["jobs"][j]["summary"]["final_disc"] for j in man.jobs}
    assert d["lr=0.1,local_steps=2,seed=0"] > d["lr=0.05,local_steps=2,seed=0"]

    _, started = sweep(GRID, out)  # rerun: nothing to do, nothing rewritten
    assert started == [] and metrics(out) == first

    victim = "lr=0.05,local_steps=2,seed=1"
    for p in (out / "jobs" / victim).iterdir():
        p.unlink()
    (out / "jobs" / victim).rmdir()
    _, started = sweep(GRID, out)
    assert started == [victim] and metrics(out) == first  # redone only that job, identically

    bad = {"base": BASE, "product": {"lr": [0.05, 1e6], "init": ["default", "/nonexistent/init.pt"]}}
    man, _ = sweep(bad, tmp_path / "bad")
    jobs = read_manifest(tmp_path / "bad")["jobs"]
    assert man.counts()["done"] == 1 and man.counts()["failed"] == 3
    error = jobs["lr=1000000.0,init=default"]["error"]  # NaN/inf, or above the overflow threshold
    assert re.match(r"diverged: (non-finite|\w+ .* > 1e\+12) at round \d+$", error), error
    assert "init" in jobs["lr=0.05,init=_nonexistent_init.pt"]["error"]
    assert jobs["lr=0.05,init=default"]["state"] == "done"
    # the diverged job keeps its metrics up to the divergence
    assert (tmp_path / "bad" / "jobs" / "lr=1000000.0,init=default" / "metrics.csv").is_file()


def test_changed_spec_refused_unless_forced(tmp_path):
    out = tmp_path / "s"
    small = {"base": BASE, "product": {"lr": [0.05, 0.1]}}
    sweep(small, out)
    changed = {"base": BASE, "product": {"lr": [0.05, 0.2]}}
    with pytest.raises(ConfigError, match="holds a different sweep.*--force"):
        sweep(changed, out)
    man, started = sweep(changed, out, force=True)
    assert started == ["lr=0.2"] and man.counts()["done"] == 2 and set(man.jobs) == {"lr=0.05", "lr=0.2"}


def test_zip_axes_and_hp_axes():
    spec = parse_spec({"base": BASE, "zip": {"algo": ["fedavg", "fosm"], "hp.beta": [None, 0.5]},
                       "product": {"seed": [0, 1]}})
    jobs = spec.jobs()
    assert [j.id for j in jobs] == ["algo=fedavg,hp.beta=None,seed=0", "algo=fedavg,hp.beta=None,seed=1",
                                    "algo=fosm,hp.beta=0.5,seed=0", "algo=fosm,hp.beta=0.5,seed=1"]
    assert jobs[0].config["hp"] == {} and jobs[3].config["hp"] == {"beta": 0.5} and jobs[3].config["seed"] == 1


def test_kill_and_resume_matches_uninterrupted(tmp_path):
    spec = {"base": {**BASE, "rounds": 150, "pairs": 4}, "product": {"lr": [0.02, 0.05, 0.1, 0.2]}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    sweep(spec, ref)
    cmd = [sys.executable, "-m", "stabkit_cli", "sweep", str(path), "--out", str(killed), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        man = killed / "manifest.json"
        if man.is_file() and any(r["state"] == "done" for r in json.loads(man.read_text())["jobs"].values()):
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    states = [r["state"] for r in read_manifest(killed)["jobs"].values()]
    assert "done" in states and states.count("done") < 4  # killed mid-sweep, after a finished job
    _, started = sweep(spec, killed)
    assert len(started) == 4 - states.count("done")
    assert metrics(killed) == metrics(ref) and len(metrics(ref)) == 4
    assert not list((killed / "jobs").glob(".*"))  # no temporaries left behind


def test_process_pool_gives_identical_metrics(tmp_path):
    spec = {"base": BASE, "product": {"lr": [0.05, 0.1]}}
    sweep(spec, tmp_path / "a")
    run_sweep(parse_spec(spec), tmp_path / "b", make_executor("local", workers=2))
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b") and len(metrics(tmp_path / "a")) == 2


def test_report_tidy_table_bounds_and_figures(tmp_path):
    out = tmp_path / "s"
    sweep(GRID, out)
    paths = sweep_report(out, bootstrap=5)
    table = pd.read_csv(paths["table"])
    assert len(table) == 8 * 7 * 2 and {"job", "lr", "local_steps", "seed", "disc"} <= set(table.columns)
    jobs = pd.read_csv(paths["jobs"]).set_index("job")
    for job_id, rec in read_manifest(out)["jobs"].items():
        final = table[(table["job"] == job_id) & (table["round"] == 6)]["disc"]
        assert jobs.loc[job_id, "D_T"] == pytest.approx(final.mean(), rel=1e-9)
        assert jobs.loc[job_id, "D_T"] == pytest.approx(rec["summary"]["final_disc"], rel=1e-6)
    assert {"job", "bound", "valid", "tightness_T", "holds"} <= set(pd.read_csv(paths["bounds"]).columns)
    names = sorted(p.name for p in paths["figures"])
    assert names == ["discrepancy.png", "vs_local_steps.png", "vs_lr.png"]
    assert all(p.stat().st_size > 10_000 for p in paths["figures"])


BAD_SPECS = [
    ({"base": BASE, "product": {"learning_rate": [0.1]}}, "invalid axis='learning_rate': a config key"),
    ({"base": BASE, "product": {"lr": []}}, "invalid axis lr=[]: a non-empty list of values"),
    ({"base": BASE, "product": {"lr": 0.1}}, "invalid axis lr=0.1: a list of values"),
    ({"base": BASE, "product": {"lr": ["fast"]}}, "invalid lr='fast': a finite number (sweep job lr=fast)"),
    ({"base": BASE, "product": {"rounds": [10, 2.5]}}, "invalid rounds=2.5: an integer (sweep job rounds=2.5)"),
    ({"base": BASE, "product": {"hp.beta": [0.5, 2.0]}, "zip": {}},
     "invalid hyperparameter 'beta' for fedavg: allowed are none (sweep job hp.beta=0.5)"),
    ({"base": {**BASE, "algo": "fosm"}, "product": {"hp.beta": [0.5, 2.0]}}, "beta=2.0"),
    ({"base": BASE, "zip": {"lr": [0.1, 0.2], "seed": [0]}}, "invalid zip="),
    ({"base": BASE, "axes": {"lr": [0.1]}}, "invalid sweep key='axes'"),
    ({"base": BASE}, "give at least one axis"),
]


@pytest.mark.parametrize("spec,message", BAD_SPECS)
def test_bad_specs_one_line_exit_2(tmp_path, capsys, spec, message):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    code, _, err = cli(["sweep", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_cli_shorthand_and_yaml_recipes_parse(tmp_path, capsys):
    code = None
    try:
        main(["sweep", "--set", "task=quadratic", "--set", "rounds=3", "--set", "pairs=1", "--set", "clients=4",
              "--set", "heldout_clients=2", "--set", "constants=false", "--set", "local_rounds=[]",
              "--axis", "lr=0.05,0.1", "--out", str(tmp_path / "o")])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr().out
    assert code in (None, 0) and "2 done, 0 failed of 2 jobs" in out and "done   lr=0.1: D_T = " in out
    recipes = sorted(Path(__file__).resolve().parents[2].joinpath("figures", "recipes").glob("*.yaml"))
    assert len(recipes) >= 7
    for recipe in recipes:
        assert len(load_spec(recipe).jobs()) >= 8, recipe


def test_an_axis_of_variants_keeps_each_variants_commas():
    """``--axis algo=fedavg,dp_fedavg[clip=2,noise_multiplier=3]`` is two algorithms, not three items."""
    from stabkit_cli.sweep import _shorthand

    spec = _shorthand(["rounds=3"], ["algo=fedavg, dp_fedavg[clip=2,noise_multiplier=3]", "lr=0.05,0.1"])
    assert spec == {"base": {"rounds": 3}, "product": {"algo": ["fedavg", "dp_fedavg[clip=2,noise_multiplier=3]"],
                                                        "lr": [0.05, 0.1]}}


def test_a_perturbation_axis_runs_the_leave_one_out_neighbours_like_the_others(tmp_path):
    """``perturb`` is an axis like any other: remove-client and remove-sample jobs run, each equal to its own
    `stabkit pair` run, beside the replace-one neighbours."""
    from stabkit import RunConfig, run_pair
    spec = {"base": {**BASE, "clients_per_round": 2},
            "product": {"perturb": ["client", "remove-client", "remove-sample"]}}
    man, started = sweep(spec, tmp_path / "s")
    assert man.counts()["done"] == 3
    jobs = {json.loads((p / "config.json").read_text())["perturb"]: p for p in (tmp_path / "s" / "jobs").iterdir()}
    assert set(jobs) == {"client", "remove-client", "remove-sample"}
    cfg = RunConfig.from_dict(json.loads((jobs["remove-client"] / "config.json").read_text()))
    run_pair(cfg, out=tmp_path / "alone")
    assert (tmp_path / "alone" / "metrics.csv").read_bytes() == (jobs["remove-client"] / "metrics.csv").read_bytes()
