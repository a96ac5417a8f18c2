"""What a run directory records about its configuration and what the analysis reads back from it: the resolved
hyperparameters (``config.json``'s ``hp_resolved``) and the client lr schedule (``RunConfig.client_lr``)."""
import json

import numpy as np
import pytest
import torch

from stabkit import ConfigError, RunConfig, load_run
from stabkit.analysis.bounds import bounds_for
from stabkit.analysis.run_analysis import analyze, setting_from_run
from stabkit.config.runconfig import RUN_FACTS
from tests.helpers import LR, K, cli, grad, local_models, tiny_run


def test_config_json_records_resolved_hp_of_a_run_without_hp(tmp_path, capsys):
    code, _, err = cli(["pair", "--algo", "fedacg", "--task", "quadratic", "--rounds", "1", "--pairs", "1",
                        "--local-steps", "1", "--no-constants", "--out", str(tmp_path / "r"), "--quiet"], capsys)
    assert code == 0, err
    recorded = json.loads((tmp_path / "r" / "config.json").read_text())
    assert recorded["hp"] == {}  # as given
    assert recorded["hp_resolved"] == {"lam": 0.9, "beta_acg": 0.01}  # FedACG's declared defaults
    # config.json re-creates the run's configuration exactly (the recorded facts are set aside)
    cfg = RunConfig.from_dict(recorded)
    assert cfg.to_dict() == {k: v for k, v in recorded.items() if k not in RUN_FACTS}
    # the CPU kernels the numbers come from (their last digits depend on them across machines)
    kernels = recorded["versions"]["kernels"]
    assert kernels["cpu_capability"] == torch.backends.cpu.get_cpu_capability() != ""
    assert f"MKL-DNN v{kernels['onednn']}" in torch.__config__.show()


def _fedacg_run(path, hp):
    tiny_run("fedacg", hp, rounds=3).run(path)
    return path


def _paper_bound(path):
    """FedACG's Table-1 bound of the run at ``path`` and the run's Theta (theta_max)."""
    constants = json.loads((path / "constants.json").read_text())
    bounds = {b.name: b for b in bounds_for(setting_from_run(load_run(path), constants))}
    return bounds["fedsagd:fedacg.paper"], constants["theta_max"]


def test_bounds_read_the_resolved_hp_from_config_json(tmp_path):
    """FedACG's Table-1 bound grows by b = (4 - 2 lam) / (1 - lam) eta_l K Theta per round (FedSAGD paper, Table 1):
    22 eta_l K Theta at the default lam = 0.9 (recorded although no hp was given), 6 eta_l K Theta at lam = 0.5."""
    default, theta = _paper_bound(_fedacg_run(tmp_path / "default", {}))
    np.testing.assert_allclose(default.values, 22.0 * LR * K * theta * np.arange(4), rtol=1e-12)
    half, theta_half = _paper_bound(_fedacg_run(tmp_path / "half", {"lam": 0.5}))
    np.testing.assert_allclose(half.values, 6.0 * LR * K * theta_half * np.arange(4), rtol=1e-12)
    # the bound takes lam from config.json's hp_resolved (the run's hp is {}: nothing else could say 0.5)
    path = tmp_path / "default"
    recorded = json.loads((path / "config.json").read_text())
    recorded["hp_resolved"]["lam"] = 0.5
    (path / "config.json").write_text(json.dumps(recorded))
    edited, _ = _paper_bound(path)
    np.testing.assert_allclose(edited.values, default.values * 6.0 / 22.0, rtol=1e-12)


def test_run_without_resolved_hp_is_one_clear_line(tmp_path):
    path = _fedacg_run(tmp_path / "old", {})
    recorded = json.loads((path / "config.json").read_text())
    del recorded["hp_resolved"]
    (path / "config.json").write_text(json.dumps(recorded))
    with pytest.raises(ConfigError, match="has no hp_resolved") as e:
        analyze(path)
    assert "\n" not in str(e.value) and str(path) in str(e.value)


def test_client_lr_schedule_numbers():
    cfg = RunConfig(lr=0.1, lr_decay=0.9)
    assert [cfg.client_lr(t) for t in range(3)] == [0.1, 0.1 * 0.9, 0.1 * 0.9 ** 2]
    np.testing.assert_array_equal(cfg.client_lr(np.arange(3)), [0.1, 0.1 * 0.9, 0.1 * 0.9 ** 2])


def test_engine_log_and_analysis_all_use_client_lr(tmp_path, monkeypatch):
    """Swap the schedule for eta_l(t) = LR / (1 + t): the engine's steps, the logged lr column and the bounds'
    lr all follow, so RunConfig.client_lr is the one place it is computed."""
    monkeypatch.setattr(RunConfig, "client_lr", lambda self, t: LR / (1 + t))
    run = tiny_run("fedavg", rounds=3)
    run.run(tmp_path)
    x = np.zeros(2)
    for t in range(3):
        x = np.mean(local_models(lambda i, y: y - LR / (1 + t) * grad(i, y), x), axis=0)
    np.testing.assert_allclose(run.engine.x[0, 0].numpy(), x, rtol=0, atol=1e-12)
    df = load_run(tmp_path)
    logged = df.groupby("round")["lr"].first().to_numpy()
    np.testing.assert_allclose(logged, [LR, LR, LR / 2, LR / 3], rtol=1e-9)  # row t: the lr of round t - 1
    np.testing.assert_allclose(setting_from_run(df, {}).lr, LR / (1 + np.arange(3)), rtol=1e-15)


def test_logged_lr_is_the_decayed_schedule(tmp_path):
    run = tiny_run("fedavg", rounds=3, lr_decay=0.5)
    run.run(tmp_path)
    logged = load_run(tmp_path).groupby("round")["lr"].first().to_numpy()
    np.testing.assert_allclose(logged, [LR, LR, LR * 0.5, LR * 0.25], rtol=1e-9)


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_every_file_a_run_writes_gets_the_umask_mode(tmp_path, capsys, mask):
    """Atomic writes rename a mkstemp file (mode 0600): the results must end with the mode an ordinary file
    gets under the user's umask (0644 by default), readable by a colleague on a shared machine."""
    import os
    import stat

    old = os.umask(mask)
    try:
        code, _, err = cli(["pair", "--task", "quadratic", "--rounds", "2", "--pairs", "1", "--save-models",
                            "every:1", "--quiet", "--out", str(tmp_path / "r")], capsys)
        assert code == 0, err
        code, _, err = cli(["bounds", str(tmp_path / "r"), "--plot", "--bootstrap", "0"], capsys)
        assert code == 0, err
    finally:
        os.umask(old)
    files = [p for p in (tmp_path / "r").rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.json", "summary.json", "metrics.csv", "checkpoint.pt", "constants.json", "pair0_a.pt",
            "discrepancy.png"} <= names, names
    modes = {str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files}
    assert set(modes.values()) == {oct(0o666 & ~mask)}, modes
