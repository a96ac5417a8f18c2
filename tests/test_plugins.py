"""Plug-ins: algorithms, models, tasks and bounds from outside the package, by entry point and import path.

The example package examples/fedyogi is installed into a throw-away directory (fixture ``fedyogi``) and run
as a user would, in subprocesses that have it installed: ``stabkit algos``, ``stabkit pair`` by entry point
and by import path, a sweep on two worker processes, ``stabkit bounds --plot``, its model from Python and its
own pytest file. Broken plug-ins are one line, exit 2.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from stabkit import RunConfig, run_pair
from stabkit.analysis.bounds import base as bounds_base
from stabkit.errors import ConfigError
from stabkit.run.experiment import PairedRun
from stabkit.tasks import TaskOptions
from stabkit.testing import assert_deterministic, assert_null_pair_zero, assert_reduces_to
from tests import plugin_fixtures
from tests.helpers import cli

SMALL = ["--rounds", "4", "--pairs", "2", "--local-steps", "3", "--global-lr", "0.03", "--quiet"]


def ok_cli(args, capsys):
    code, out, err = cli(args, capsys)
    assert code == 0, err
    return out


def test_example_runs_through_pair_and_bounds_by_entry_point_and_import_path(fedyogi, tmp_path):
    stabkit = lambda *args: fedyogi.run(["-m", "stabkit_cli", *args])
    listing = stabkit("algos")
    assert "fedyogi  (FedYogi)" in listing and "[plug-in stabkit_fedyogi.algorithm]" in listing
    assert "beta2 = 0.99" in listing
    assert "tanh_mlp" in stabkit("models")
    stabkit("pair", "--algo", "fedyogi", "--model", "tanh_mlp", *SMALL, "--out", tmp_path / "ep")
    stabkit("pair", "--algo", "stabkit_fedyogi.algorithm:FedYogi", "--model", "stabkit_fedyogi.model:tanh_mlp",
            *SMALL, "--no-constants", "--out", tmp_path / "path")
    a, b = (pd.read_csv(tmp_path / name / "metrics.csv") for name in ("ep", "path"))
    pd.testing.assert_frame_equal(a, b)  # the same algorithm and model, found two ways
    assert (a.loc[a["round"] == 4, "disc"] > 0).all() and "disc_v" in a and "norm_m_a" in a
    cfg = json.loads((tmp_path / "ep" / "config.json").read_text())
    assert (cfg["algo"], cfg["model"]) == ("fedyogi", "tanh_mlp")

    report = stabkit("bounds", tmp_path / "ep", "--plot", "--bootstrap", "0")
    rows = [line.split() for line in report.splitlines() if line.startswith("fedyogi.step_norm")]
    assert [r[2] for r in rows] == ["measured", "constants"]
    for r in rows:
        valid, bound_T, ratio, holds = r[3], float(r[4]), float(r[5]), r[6]
        assert valid == "True" and holds == "True" and ratio > 1 and bound_T > a["disc"].max()
    assert (tmp_path / "ep" / "figures" / "discrepancy.png").stat().st_size > 10_000
    # the same bound is evaluated for the run named by import path (bounds key on the class's name)
    assert "fedyogi.step_norm" in stabkit("bounds", tmp_path / "path", "--bootstrap", "0")


def test_sweep_on_two_workers_imports_the_plugin_in_each_worker(fedyogi, tmp_path):
    spec = {"base": {"rounds": 3, "pairs": 2, "local_steps": 2, "constants": False, "model": "tanh_mlp",
                     "global_lr": 0.03},
            "zip": {"algo": ["fedyogi", "stabkit_fedyogi.algorithm:FedYogi", "fedavg"]}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    fedyogi.run(["-m", "stabkit_cli", "sweep", path, "--workers", "2", "--out", tmp_path / "s", "--quiet"])
    jobs = sorted((tmp_path / "s" / "jobs").iterdir())
    assert [j.name for j in jobs] == ["algo=fedavg", "algo=fedyogi", "algo=stabkit_fedyogi.algorithm_FedYogi"]
    m = {j.name: pd.read_csv(j / "metrics.csv") for j in jobs}
    pd.testing.assert_frame_equal(m["algo=fedyogi"], m["algo=stabkit_fedyogi.algorithm_FedYogi"])
    assert not np.allclose(m["algo=fedyogi"]["disc"], m["algo=fedavg"]["disc"])  # really FedYogi's server


def test_example_package_own_tests_pass(fedyogi):
    out = fedyogi.run(["-m", "pytest", "-q", "-p", "no:cacheprovider", fedyogi.path / "tests"], cwd=fedyogi.path)
    assert "3 passed" in out


def test_user_model_runs_on_the_torch_func_path(fedyogi):
    """Run in a subprocess that has the example installed (the body below, ``user_model_runs``)."""
    assert fedyogi.run(["-c", "from tests.test_plugins import user_model_runs; user_model_runs()"]) == "done\n"


def user_model_runs():
    from stabkit_fedyogi.model import tanh_mlp

    cfg = RunConfig(rounds=2, pairs=2, local_steps=2)
    by_name = PairedRun(cfg.replace(model="tanh_mlp"))
    by_object = PairedRun(cfg, model=tanh_mlp)
    by_module = PairedRun(cfg, model=plugin_fixtures.tanh_net)
    assert by_name.model.fast is None and by_object.model.fast is None and by_module.model.fast is None
    assert PairedRun(cfg).model.fast is not None  # the built-in MLP takes the hand-written path
    assert by_object.cfg.model == "stabkit_fedyogi.model:tanh_mlp"
    for run in (by_name, by_object, by_module):
        for t in range(2):
            run.step()
    assert torch.equal(by_name.engine.x, by_object.engine.x)
    assert (by_module.engine.discrepancy() > 0).all() and torch.isfinite(by_module.engine.x).all()
    instance = PairedRun(cfg, model=plugin_fixtures.tanh_net(by_name.task))
    assert instance.cfg.model == "instance of tests.plugin_fixtures:Tanh"
    assert torch.equal(instance.engine.x[0], instance.engine.x[1])  # every pair starts from the module's parameters
    print("done")


def test_ready_made_task_with_six_clients_takes_its_counts_from_the_task(tmp_path):
    """participation=1 on a 6-client task crashed in np.broadcast_to (s taken from TaskOptions().clients)."""
    task = plugin_fixtures.six_clients(TaskOptions())
    summary = run_pair(RunConfig(participation=1.0, rounds=3, pairs=2, constants=False), out=tmp_path / "r",
                       task=task)
    assert summary["status"] == "completed"
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["task"] == "six" and cfg["task_options"]["clients"] == 6 and cfg["task_options"]["heldout_clients"] == 2
    run = PairedRun(RunConfig(participation=1.0, rounds=1), task=task)
    assert run.cfg.sampled_clients == 6 and run.engine.round_rows(0)[1].shape == (8, 2, 6)
    with pytest.raises(ConfigError, match=r"invalid clients_per_round=7: at most the number of clients \(6\)"):
        PairedRun(RunConfig(clients_per_round=7), task=task)
    broken = plugin_fixtures.six_clients(TaskOptions())
    broken.num_train_clients = 7
    with pytest.raises(ConfigError, match="invalid task='six': needs at least 2 held-out clients"):
        PairedRun(RunConfig(), task=broken)


def test_task_plugin_by_import_path(tmp_path, capsys):
    ok_cli(["pair", "--task", "tests.plugin_fixtures:six_clients", "--participation", "1", "--rounds", "2",
            "--pairs", "1", "--no-constants", "--quiet", "--out", str(tmp_path / "r")], capsys)
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert cfg["task"] == "tests.plugin_fixtures:six_clients" and cfg["task_options"]["clients"] == 6
    assert pd.read_csv(tmp_path / "r" / "metrics.csv")["round"].max() == 2


@pytest.mark.parametrize("args,message", [
    (["--algo", "nosuch_pkg.mod:Algo"], "invalid algo='nosuch_pkg.mod:Algo': no module named 'nosuch_pkg'"),
    (["--algo", "tests.plugin_fixtures:NoSuch"], "tests.plugin_fixtures has no attribute 'NoSuch'"),
    (["--algo", "stabkit.tasks.base:Task"], "invalid algo='stabkit.tasks.base:Task': <class "),
    (["--algo", "nosuch"], "invalid algo='nosuch': one of fedavg,"),
    (["--model", "tests.plugin_fixtures:raising_factory"],
     "invalid model='tests.plugin_fixtures:raising_factory': the plug-in raised RuntimeError: no GPU kernels"),
    (["--model", "tests.plugin_fixtures:six_clients"], "invalid model='tests.plugin_fixtures:six_clients': the plug-in raised"),
    (["--task", "tests.plugin_fixtures:not_a_task"], "invalid task='tests.plugin_fixtures:not_a_task': a stabkit.tasks.Task"),
    (["--algo", "tests.bad_bound_plugin:WithBadBound"],
     "invalid bound='bad.signature' (tests.bad_bound_plugin:bound): must be a function f(setting)"),
])
def test_bad_plugins_are_one_line_and_exit_2(args, message, tmp_path, capsys):
    code, out, err = cli(["pair", *args, "--rounds", "1", "--quiet", "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and err.startswith("error: ") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "r").exists()


def test_bound_entry_points_register_plain_functions_and_reject_wrong_signatures(tmp_path, capsys, monkeypatch):
    from importlib.metadata import EntryPoint

    run_pair(RunConfig(rounds=3, pairs=2, constants=False), out=tmp_path / "r")
    installed = {"fedavg": EntryPoint("fedavg", "tests.plugin_fixtures:plain_bound", "stabkit.bounds")}
    monkeypatch.setattr(bounds_base.plugins, "installed", lambda kind: installed if kind == "bound" else {})
    monkeypatch.setattr(bounds_base, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.setattr(bounds_base, "_REGISTRY", {k: list(v) for k, v in bounds_base._REGISTRY.items()})
    report = ok_cli(["bounds", str(tmp_path / "r"), "--bootstrap", "0"], capsys)
    row = next(line.split() for line in report.splitlines() if line.startswith("plain"))
    assert row[2:4] == ["test", "True"] and float(row[4]) == 3e3
    installed["fedavg"] = EntryPoint("fedavg", "tests.plugin_fixtures:two_argument_bound", "stabkit.bounds")
    monkeypatch.setattr(bounds_base, "_ENTRY_POINTS_LOADED", False)
    code, out, err = cli(["bounds", str(tmp_path / "r"), "--bootstrap", "0"], capsys)  # skipped, with a warning
    assert code == 0 and err.count("\n") == 1 and "D_T = " in out
    assert err.startswith("warning: skipping the stabkit.bounds entry point 'fedavg': invalid bound="
                          "'fedavg.two_argument_bound' (tests.plugin_fixtures:two_argument_bound)"), err


def test_one_broken_entry_point_is_named_once_and_the_rest_goes_on(tmp_path, capsys, monkeypatch):
    """A third-party entry point that does not import leaves `algos`, `bounds` and `report` working: one
    warning naming it and its error, then the usual output."""
    from importlib.metadata import EntryPoint

    from stabkit import plugins

    eps = {"algo": {"broken": EntryPoint("broken", "nosuch_pkg.mod:Algo", "stabkit.algorithms")},
           "bound": {"fedavg": EntryPoint("fedavg", "nosuch_pkg.bounds:bound", "stabkit.bounds")}}
    monkeypatch.setattr(plugins, "installed", lambda kind: eps.get(kind, {}))
    monkeypatch.setattr(plugins, "_WARNED", set())
    monkeypatch.setattr(bounds_base, "_ENTRY_POINTS_LOADED", False)
    code, out, err = cli(["algos"], capsys)
    assert code == 0 and out.startswith("fedavg  (") and "fedsagd  (" in out and "broken" not in out
    assert err == ("warning: skipping the stabkit.algorithms entry point 'broken': invalid algo='broken' "
                   "(entry point stabkit.algorithms -> nosuch_pkg.mod:Algo): no module named 'nosuch_pkg'\n")
    code, out, err = cli(["algos", "--markdown"], capsys)
    assert code == 0 and "| `fedavg` |" in out and err == ""  # warned once per process
    ok_cli(["sweep", "--out", str(tmp_path / "sw"), "--axis", "seed=0,1", "--set", "rounds=2", "--set", "pairs=1",
            "--set", "constants=false", "--quiet"], capsys)
    code, out, err = cli(["report", str(tmp_path / "sw"), "--no-plot", "--bootstrap", "0"], capsys)
    assert code == 0, err
    assert err.count("\n") == 1 and "entry point 'fedavg'" in err and "no module named 'nosuch_pkg'" in err
    assert len(pd.read_csv(tmp_path / "sw" / "report" / "jobs.csv")) == 2
    code, out, err = cli(["bounds", str(tmp_path / "sw" / "jobs" / os.listdir(tmp_path / "sw" / "jobs")[0]),
                          "--bootstrap", "0"], capsys)
    assert code == 0 and "D_T = " in out and err == ""


def test_author_checks_fail_on_broken_algorithms():
    with pytest.raises(AssertionError, match="server|x differs between the trajectories of the null pair after round 1"):
        assert_null_pair_zero("tests.plugin_fixtures:Asymmetric")
    with pytest.raises(AssertionError, match="x differs between two runs of the same seed after round 1"):
        assert_deterministic(plugin_fixtures.Unseeded)
    assert_null_pair_zero(plugin_fixtures.Unseeded)  # noise shared by both trajectories keeps the pair equal
    with pytest.raises(AssertionError, match="global models differ after round 1"):
        assert_reduces_to("fedprox", "fedavg", {"lam": 0.1}, rounds=2)


def test_plugin_tutorial_runs_as_written(tmp_path):
    """docs/plugins.md, "measure your own algorithm": its files written to an empty folder, its commands run
    there."""
    section = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    files = {code.splitlines()[0].removeprefix("# file: "): code for lang, code in blocks if lang == "python"}
    assert sorted(files) == ["myalgo.py", "test_myalgo.py"]
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    lines = sum(1 for code in files.values() for line in code.splitlines()[1:] if line.strip())
    assert lines == 35  # the count the page states
    [commands] = [code for lang, code in blocks if lang == "sh"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", commands], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    row = next(line.split() for line in done.stdout.splitlines() if line.startswith("fedadagrad.step"))
    assert row[2:4] == ["measured", "True"] and row[6] == "True"  # valid, and it holds at every round
    assert (tmp_path / "runs" / "mine" / "figures" / "discrepancy.png").is_file()
    assert "1 passed" in done.stdout


def test_task_and_model_entry_points(tmp_path, capsys, monkeypatch):
    from importlib.metadata import EntryPoint

    from stabkit import plugins

    eps = {"task": {"six": EntryPoint("six", "tests.plugin_fixtures:six_clients", "stabkit.tasks")},
           "model": {"tanh": EntryPoint("tanh", "tests.plugin_fixtures:tanh_net", "stabkit.models")}}
    monkeypatch.setattr(plugins, "installed", lambda kind: eps.get(kind, {}))
    ok_cli(["pair", "--task", "six", "--model", "tanh", "--rounds", "2", "--pairs", "1", "--no-constants",
            "--quiet", "--out", str(tmp_path / "r")], capsys)
    cfg = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (cfg["task"], cfg["model"], cfg["task_options"]["clients"]) == ("six", "tanh", 6)
    code, _, err = cli(["pair", "--task", "sixx", "--quiet"], capsys)
    assert code == 2 and "invalid task='sixx': one of digits," in err and ", six, or an import path" in err


def test_bound_reading_a_hyperparameter_the_algorithm_lacks_says_so(tmp_path, capsys, monkeypatch):
    """Not a silent 'unavailable' row (that is for missing constants): one line naming the bound, the key
    and the hyperparameters the run has."""
    from importlib.metadata import EntryPoint

    run_pair(RunConfig(rounds=3, pairs=1, constants=False), out=tmp_path / "r")
    installed = {"fedavg": EntryPoint("fedavg", "tests.plugin_fixtures:missing_hp_bound", "stabkit.bounds")}
    monkeypatch.setattr(bounds_base.plugins, "installed", lambda kind: installed if kind == "bound" else {})
    monkeypatch.setattr(bounds_base, "_ENTRY_POINTS_LOADED", False)
    monkeypatch.setattr(bounds_base, "_REGISTRY", {k: list(v) for k, v in bounds_base._REGISTRY.items()})
    code, out, err = cli(["bounds", str(tmp_path / "r"), "--bootstrap", "0"], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert ("invalid bound='fedavg.missing_hp_bound' (tests.plugin_fixtures:missing_hp_bound): reads hyperparameter "
            "'beta', which fedavg does not have (its hyperparameters: none)") in err


def test_a_plugin_stepping_in_place_runs_as_fedavg():
    """The default ``client_init`` starts from x_t's broadcast view (no copies); a plug-in that updates ``y`` in
    place gets a copy of its own and runs exactly as FedAvg (without it torch refuses the write)."""
    cfg = RunConfig(rounds=3, pairs=2, local_steps=2)
    runs = [PairedRun(cfg.replace(algo=a)) for a in ("fedavg", "tests.plugin_fixtures:InPlaceStep")]
    for run in runs:
        for _ in range(3):
            run.step()
    assert (runs[0].engine.discrepancy() > 0).all()
    assert torch.equal(runs[0].engine.x, runs[1].engine.x)


def test_a_plugin_raising_in_round_5_stops_cleanly_and_keeps_rounds_0_to_4(tmp_path, capsys):
    """Round 1 (tried before anything is written) works; round 5 raises: one line naming the plug-in, the hook
    and its reason, exit 2, and the run folder keeps rounds 0-4 with a summary saying the run failed."""
    from tests.helpers import cli

    out = tmp_path / "run"
    code, _, err = cli(["pair", "--task", "quadratic", "--rounds", "8", "--pairs", "2", "--clients", "4",
                        "--heldout-clients", "2", "--samples-per-client", "20", "--algo",
                        "tests.plugin_fixtures:RaisesInRound5", "--out", str(out), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err == (f"error: invalid algo='tests.plugin_fixtures:RaisesInRound5': its server_update raised "
                   f"RuntimeError: the plug-in's own bug in round 5; rounds 0-4 are kept in {out}\n")
    metrics = pd.read_csv(out / "metrics.csv")
    assert list(metrics["round"]) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["rounds_done"] == 4 and "round 5" in summary["failed_reason"]
    assert summary["constants"] == "skipped: the run failed"
