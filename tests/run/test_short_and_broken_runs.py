"""`stabkit bounds` / `report` on runs too short to fit, diverged runs and damaged run directories: what
cannot be computed is named in one line, everything else is still reported; damaged files are one line,
exit 2; JSON output is strict (null, never NaN)."""
import errno
import json
import shutil

import pytest

from stabkit import RunConfig, TaskOptions
from stabkit.run.experiment import OVERFLOW, run_pair
from tests.helpers import cli

QUAD = dict(task="quadratic", pairs=2, local_steps=2, local_rounds=(0,),
            task_options=TaskOptions(clients=4, heldout_clients=2, quad_dim=4))


def _strict(text: str):
    """json.loads that refuses NaN/Infinity as JSON.parse and jq do."""
    def refuse(name):
        raise ValueError(f"bare {name} in JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, kw in {"short": dict(rounds=2), "long": dict(rounds=6),
                     "diverged": dict(rounds=5, lr=1e9)}.items():
        run_pair(RunConfig(**QUAD, **kw), out=root / name)
        out[name] = root / name
    return out


def test_short_run_names_the_fits_not_made_and_reports_the_rest(runs, tmp_path, capsys):
    code, out, err = cli(["bounds", str(runs["short"]), "--plot", "--out", str(tmp_path / "fig")], capsys)
    assert code == 0, err
    assert "growth fit: not made: T = 2 gives 3 points (rounds 0..T), a growth-law fit needs at least 4" in out
    assert "local fit: not made: K = 2 local steps gives 3 points" in out
    assert "fedsagd:fedavg.corrected" in out and "Libra (Corollary 1" in out  # bounds and Libra still there
    assert {p.name for p in (tmp_path / "fig").glob("*.png")} == {"discrepancy.png", "local.png", "gap.png",
                                                                "libra.png", "fit_table.png"}


def test_run_over_the_overflow_threshold_is_diverged_and_still_analysed(runs, capsys):
    summary = json.loads((runs["diverged"] / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["diverged_round"] == 1
    assert summary["diverged_reason"].startswith("parameter norm") and summary["divergence_threshold"] == OVERFLOW
    code, out, err = cli(["bounds", str(runs["diverged"])], capsys)
    assert code == 0, err
    assert "T = 0 (diverged at round 1) gives 1 points" in out and "bounds: not computed: no round after round 0" in out


def test_run_that_diverges_inside_round_1_is_analysed_on_its_finite_rounds_and_steps(tmp_path, capsys):
    """--lr 1e30 on digits: NaN from the first local step on (local.csv of round 0 too); the analysis keeps
    round 0 and the finite local steps and names what it could not fit."""
    run_pair(RunConfig(lr=1e30, rounds=3, pairs=2, constants=False), out=tmp_path / "r")
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["diverged_round"] == 1
    code, out, err = cli(["bounds", str(tmp_path / "r"), "--plot"], capsys)
    assert code == 0, err
    assert "local fit: not made: K = 0 local steps (non-finite from step 1 of round 0) gives 1 points" in out
    assert "T = 0 (diverged at round 1) gives 1 points" in out
    assert (tmp_path / "r" / "figures" / "discrepancy.png").is_file()


def test_json_outputs_are_strict_json(runs, capsys):
    for name in ("short", "long", "diverged"):
        code, out, _ = cli(["bounds", str(runs[name]), "--format", "json", "--bootstrap", "0"], capsys)
        assert code == 0
        payload = _strict(out)[0]
        _strict((runs[name] / "summary.json").read_text())  # regression: test accuracy is null, not NaN
    assert payload["summary"]["best_law"] is None and payload["fits"] is None
    assert "growth fit" in payload["missing"] and payload["summary"]["sat.rho"] is None
    assert json.loads((runs["short"] / "summary.json").read_text())["final_test_acc"]["mean"] is None


def _damage(run, tmp_path, name, how):
    bad = tmp_path / name
    shutil.copytree(run, bad)
    how(bad)
    return bad


DAMAGE = {
    "cut": (lambda d: (d / "metrics.csv").write_text((d / "metrics.csv").read_text()[:-7]),
            "metrics.csv is cut off in line"),
    "empty": (lambda d: (d / "metrics.csv").write_text(""), "metrics.csv is empty"),
    "no_columns": (lambda d: (d / "metrics.csv").write_text("a,b\n1,2\n"), "lacks the columns round, pair, disc"),
    "summary": (lambda d: (d / "summary.json").write_text('{"status": '), "invalid summary="),
    "constants": (lambda d: (d / "constants.json").write_text("xx"), "invalid constants="),
    "config": (lambda d: (d / "config.json").write_text("{"), "invalid config="),
    "config_keys": (lambda d: (d / "config.json").write_text("{}"), "config.json has no hp_resolved"),
    "config_types": (lambda d: (d / "config.json").write_text('{"hp_resolved": {}, "rounds": "many"}'), "rounds"),
    "config_list": (lambda d: (d / "config.json").write_text("[1]"), "expected a mapping in the config file of a run, got list"),
}


@pytest.mark.parametrize("name", DAMAGE)
def test_damaged_run_directory_is_one_line_exit_2(runs, tmp_path, capsys, name):
    how, message = DAMAGE[name]
    bad = _damage(runs["long"], tmp_path, name, how)
    code, out, err = cli(["bounds", str(bad)], capsys)
    assert code == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_figure_and_report_directories_that_cannot_be_written(runs, tmp_path, capsys, monkeypatch):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, out, err = cli(["bounds", str(runs["long"]), "--plot", "--out", str(blocker / "fig")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "is a file, so no directory can be created" in err
    import stabkit.store.outdir as outdir

    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(outdir.tempfile, "NamedTemporaryFile", read_only)
    code, out, err = cli(["bounds", str(runs["long"]), "--plot", "--out", str(tmp_path / "ro")], capsys)
    assert code == 2 and err.count("\n") == 1 and "Read-only file system" in err


def test_labels_from_the_command_line_config_and_differences(runs, tmp_path, capsys):
    code, out, _ = cli(["bounds", str(runs["short"]), str(runs["long"]), "--bootstrap", "0"], capsys)
    assert "[fedavg rounds=2, " in out and "[fedavg rounds=6, " in out
    code, out, _ = cli(["bounds", f"{runs['short']}=two rounds", str(runs["long"])], capsys)
    assert "[two rounds, " in out and "[fedavg rounds=6, " in out
    code, out, err = cli(["pair", "--task", "quadratic", "--rounds", "1", "--pairs", "1", "--quad-dim", "2",
                          "--no-constants", "--quiet", "--label", "my baseline", "--out", str(tmp_path / "p")], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "p" / "config.json").read_text())["label"] == "my baseline"
    RunConfig.from_dict(json.loads((tmp_path / "p" / "config.json").read_text()))  # still a readable config
    code, out, _ = cli(["bounds", str(tmp_path / "p"), str(runs["long"])], capsys)
    assert "[my baseline, " in out


def test_distinct_labels_show_what_differs():
    from stabkit.analysis.labels import distinct_labels

    a = {"algo": "fedavg", "lr": 0.1, "seed": 0, "hp": {}, "versions": {"torch": "1"}}
    b = {"algo": "fedavg", "lr": 0.05, "seed": 0, "hp": {}, "versions": {"torch": "2"}}
    c = {"algo": "fosm", "lr": 0.1, "seed": 0, "hp": {"beta": 0.5}, "versions": {}}
    assert distinct_labels([a, b]) == ["fedavg lr=0.1", "fedavg lr=0.05"]
    assert distinct_labels([a, c]) == ["fedavg beta=default", "fosm beta=0.5"]
    assert distinct_labels([a]) == ["fedavg"]
    cfgs = [RunConfig.from_dict({"algo": algo, "task": "quadratic"}) for algo in ("fedsagd", "fedavg")]
    recorded = [{**c.to_dict(), "algo_spec": c.algo_spec.to_dict()} for c in cfgs]  # as config.json records them
    assert distinct_labels(recorded) == ["fedsagd", "fedavg"]  # the spec restates algo and hp: named once
