"""``stabkit privacy`` and ``stabkit audit`` on the command line, and the issue's bad inputs: each one line, exit
status 2, nothing written."""
import json
import sys

import pytest

from tests.helpers import cli

SMALL = ["--task", "quadratic", "--clients", "6", "--heldout-clients", "2", "--quad-dim", "4",
         "--samples-per-client", "8", "--rounds", "2", "--pairs", "2", "--clients-per-round", "6",
         "--local-steps", "2", "--batch-size", "4", "--no-constants"]


@pytest.fixture(scope="module")
def dp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "dp"
    from stabkit_cli.main import main
    main(["pair", *SMALL, "--quiet", "--algo", "dp_fedavg", "--hp", "clip=0.05", "--hp", "noise_multiplier=2",
          "--perturb", "client", "--client-mode", "population", "--out", str(out)])
    return out


def test_pair_prints_a_dp_runs_epsilons(tmp_path, capsys):
    code, text, _ = cli(["pair", *SMALL, "--algo", "dp_fedavg", "--out", str(tmp_path / "r")], capsys)
    record = json.loads((tmp_path / "r" / "privacy.json").read_text())
    assert code == 0
    assert f"epsilon_accountant {record['epsilon_accountant']:.4g} (pld)" in text


def test_privacy_json_has_the_sandwich_keys_and_the_bound(dp_run, capsys):
    code, out, _ = cli(["privacy", str(dp_run), "--format", "json", "--delta", "1e-6"], capsys)
    assert code == 0
    r = json.loads(out)
    assert r["delta"] == 1e-6 and r["epsilon_audit_lower"] is None
    assert 0 < r["epsilon_measured"] <= r["epsilon_accountant"]
    assert r["dp_stability_bound"] == pytest.approx(2.718281828459045 ** r["epsilon_accountant"] - 1 + 1e-6)
    assert r["accountant"]["accountant"] == "pld"  # full participation: the exact Gaussian composition


def test_audit_then_privacy_with_the_audit(dp_run, tmp_path, capsys):
    code, out, _ = cli(["audit", *SMALL, "--algo", "dp_fedavg", "--hp", "clip=0.05", "--hp", "noise_multiplier=2",
                        "--perturb", "client", "--client-mode", "population", "--trials", "400",
                        "--out", str(tmp_path / "audit")], capsys)
    assert code == 0 and "epsilon_lower" in out
    code, out, _ = cli(["privacy", str(dp_run), "--audit", str(tmp_path / "audit"), "--format", "json"], capsys)
    r = json.loads(out)
    assert 0 <= r["epsilon_audit_lower"] <= r["epsilon_measured"] <= r["epsilon_accountant"]
    code, out, _ = cli(["privacy", str(dp_run), "--plot"], capsys)
    assert code == 0 and (dp_run / "figures" / "privacy.png").is_file()


def test_noise_zero_is_allowed_and_says_epsilon_is_infinite(tmp_path, capsys):
    out = tmp_path / "quiet"
    code, text, _ = cli(["pair", *SMALL, "--algo", "dp_fedavg", "--hp", "noise_multiplier=0", "--out", str(out)],
                        capsys)
    assert code == 0 and "privacy: this run adds no noise: epsilon = infinity" in text
    code, text, _ = cli(["privacy", str(out)], capsys)
    assert code == 0 and "accountant  inf" in text


@pytest.mark.parametrize("args, message", [
    (["pair", "--wrap", "dp:clip=0"], "invalid clip=0: "),
    (["pair", "--wrap", "dp:clip=nan"], "invalid clip=nan"),
    (["pair", "--algo", "dp_fedavg", "--hp", "noise_multiplier=-0.5"], "invalid noise_multiplier=-0.5"),
    (["pair", "--algo", "scaffold", "--wrap", "dp:clip=1"], "its uploads (dc, delta) are not only its model delta"),
    (["pair", "--algo", "fedavg", "--dp-noise", "shared"], "invalid dp_noise='shared'"),
    (["audit", "--algo", "dp_fedavg", "--trials", "9"], "invalid trials=9: at least 10 are needed"),
    (["audit", "--algo", "dp_fedavg", "--delta", "1"], "invalid delta=1.0: a number in (0, 1)"),
    (["audit", "--algo", "fedavg", "--trials", "20"], "this run adds no noise: epsilon = infinity"),
])
def test_bad_inputs_are_one_line_exit_2_and_write_nothing(args, message, tmp_path, capsys):
    out = tmp_path / "out"
    code, _, err = cli([args[0], *SMALL, *args[1:], "--out", str(out)], capsys)
    assert code == 2
    assert message in err and err.strip().count("\n") == 0
    assert not out.exists()


def test_privacy_refuses_a_run_without_dp_and_a_delta_outside_0_1(dp_run, tmp_path, capsys):
    plain = tmp_path / "plain"
    code, text, _ = cli(["pair", *SMALL, "--out", str(plain)], capsys)
    assert code == 0 and "epsilon" not in text
    code, _, err = cli(["privacy", str(plain)], capsys)
    assert code == 2 and "this run adds no noise: epsilon = infinity" in err
    for bad in ("0", "1", "-1e-5"):
        code, _, err = cli(["privacy", str(dp_run), "--delta", bad], capsys)
        assert code == 2 and "invalid delta=" in err


def _edit_privacy(run, change):
    record = json.loads((run / "privacy.json").read_text())
    change(record)
    (run / "privacy.json").write_text(json.dumps(record))


def _negative_sensitivity(run):
    import pandas as pd

    df = pd.read_csv(run / "metrics.csv")
    df.loc[df["round"] == 1, "dp_sensitivity"] = -0.5
    df.to_csv(run / "metrics.csv", index=False)


@pytest.mark.parametrize("damage, message", [
    (lambda run: _edit_privacy(run, lambda r: r["schedule"].update(noise_multiplier=1000)),
     "privacy.json is damaged: its noise_multiplier is 1000, but config.json and metrics.csv give 2"),
    (lambda run: _edit_privacy(run, lambda r: r["schedule"].update(clip=1.0)), "its clip is 1.0"),
    (lambda run: _edit_privacy(run, lambda r: r["schedule"].update(rounds=20)), "its rounds is 20"),
    (lambda run: _edit_privacy(run, lambda r: r["schedule"].pop("sampled")), "its schedule lacks 'sampled'"),
    (_negative_sensitivity, "metrics.csv is damaged: a dp_sensitivity of -0.5"),
])
def test_privacy_refuses_a_damaged_record_naming_it(dp_run, tmp_path, capsys, damage, message):
    """privacy.json is cross-checked against config.json and the metrics (the issue's noise multiplier edited
    2 -> 1000 gave epsilon 0.0083 for a run that spent 8.39); negative sensitivities are refused."""
    import shutil

    run = tmp_path / "dp"
    shutil.copytree(dp_run, run)
    damage(run)
    code, _, err = cli(["privacy", str(run)], capsys)
    assert code == 2 and message in err and err.strip().count("\n") == 0, err


def test_audit_refuses_an_out_that_holds_an_audit(tmp_path, capsys):
    (tmp_path / "audit").mkdir()
    (tmp_path / "audit" / "audit.json").write_text("{}")
    code, _, err = cli(["audit", *SMALL, "--algo", "dp_fedavg", "--trials", "20", "--out", str(tmp_path / "audit")],
                       capsys)
    assert code == 2 and "it already holds an audit" in err
    assert (tmp_path / "audit" / "audit.json").read_text() == "{}"


def test_a_missing_dp_accounting_names_its_install_command_before_anything_is_written(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    out = tmp_path / "out"
    code, _, err = cli(["pair", *SMALL, "--algo", "dp_fedavg", "--out", str(out)], capsys)
    assert code == 2 and 'pip install -e ".[privacy]"' in err
    assert not out.exists()
