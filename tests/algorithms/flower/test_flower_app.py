"""``stabkit pair --flwr-app``: a whole Flower app (the example's ClientApp, strategy and initial arrays) paired
end to end, and the app's bad inputs in one table."""
import json
from pathlib import Path

import pandas as pd
import pytest

from stabkit import RunConfig
from stabkit.run.flwr_files import run_app
from tests.cli.test_bad_inputs import check_refused
from tests.helpers import cli

pytest.importorskip("flwr")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "flower_digits"
FIX = "tests.flower_fixtures:"
ARGS = ["--pairs", "2", "--rounds", "2", "--clients-per-round", "3", "--quiet"]


@pytest.mark.parametrize("perturb", ["none", "client", "remove-client"])
def test_the_example_app_runs_end_to_end(perturb, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(EXAMPLE)
    code, out, err = cli(["pair", "--flwr-app", "app:stabkit_app", "--perturb", perturb, "--out",
                          str(tmp_path / "run"), *ARGS], capsys)
    assert code == 0, err
    rows = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert list(rows["round"]) == [0, 0, 1, 1, 2, 2] and list(rows["pair"]) == [0, 1] * 3
    if perturb == "none":
        assert (rows["disc"] == 0).all()
    else:  # the perturbed node's held-out partition (or its removal) separates the runs from its first sampling
        first = rows[rows["hit"] == 1].groupby("pair")["round"].min()
        for pair, t in first.items():
            mine = rows[rows["pair"] == pair]
            assert (mine[mine["round"] < t]["disc"] == 0).all() and (mine[mine["round"] >= t]["disc"] > 0).all()
    assert "24 ClientApp calls" in out  # 2 pairs x 2 trajectories x 3 clients x 2 rounds


def test_a_deterministic_app_gives_the_same_bits_twice(tmp_path):
    cfg = RunConfig(pairs=2, rounds=3, clients_per_round=2, perturb="client")
    for name in ("a", "b"):
        run_app(f"{FIX}good_app", cfg, tmp_path / name)
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == (tmp_path / "b" / "metrics.csv").read_bytes()


APP = [
    (["--flwr-app", "app_without_colon"], "invalid flwr_app='app_without_colon': an import path"),
    (["--flwr-app", f"{FIX}not_a_dict_app"], "a function returning a dict with client_app, strategy, arrays, "
                                             "partitions"),
    (["--flwr-app", f"{FIX}good_app", "--perturb", "sample"], "invalid perturb='sample' with --flwr-app"),
    (["--flwr-app", f"{FIX}no_heldout_app", "--perturb", "client"], "--perturb client needs a held-out partition"),
    (["--flwr-app", f"{FIX}good_app", "--perturb", "remove-sample"], "invalid perturb='remove-sample' with --flwr-app"),
    (["--flwr-app", f"{FIX}good_app", "--clients-per-round", "5"], "at most the app's 4 partitions"),
    (["--flwr-app", f"{FIX}good_app", "--perturb", "remove-client", "--clients-per-round", "4"],
     "invalid clients_per_round=4: at most 3 with --perturb remove-client"),
    (["--flwr-app", f"{FIX}good_app", "--resume", "somewhere"], "with --resume or --estimate"),
    (["--flwr-app", f"{FIX}good_app", "--estimate"], "with --resume or --estimate"),
    # options an app run would ignore, refused by name
    *[(["--flwr-app", f"{FIX}good_app", option, value], f"invalid option {option} with --flwr-app") for option, value in
      [("--algo", "fedprox"), ("--lr", "0.1"), ("--local-steps", "3"), ("--save-models", "none"),
       ("--dtype", "float64")]],
    (["--flwr-app", f"{FIX}good_app", "--hp", "mu=1"], "invalid option --hp with --flwr-app"),
    # the output paths, checked before the app is even loaded
    (["--flwr-app", f"{FIX}good_app", "--out", "@afile"], "invalid out="),
    (["--flwr-app", f"{FIX}good_app", "--out", "r", "--tensorboard", "@afile"], "invalid tensorboard="),
    # a ClientApp refused in round 1 leaves nothing (round 1 runs before anything is written)
    (["--flwr-app", f"{FIX}raising_app"], "the ClientApp raised ValueError: no data for this node"),
    (["--flwr-app", f"{FIX}nondeterministic_app", "--perturb", "none"], "the ClientApp is not deterministic"),
]


@pytest.mark.parametrize("args,needle", APP, ids=[" ".join(a) for a, _ in APP])
def test_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(["pair", *args, "--pairs", "1", "--rounds", "2", "--quiet"], needle, tmp_path, capsys,
                  monkeypatch)


STOPS = [  # a ClientApp that misbehaves after round 1: a failed run, its rounds kept, no --resume advised
    ("nondeterministic_from_round3_app", "at round 3 (pair 0, trajectory B, node 2): the ClientApp is not "
                                         "deterministic under a fixed seed", 2),
    ("urandom_strategy_app", "at round 3 (pair 0, trajectory B): the strategy is not deterministic", 2),
]


@pytest.mark.parametrize("name,needle,kept", STOPS)
def test_a_client_app_failing_mid_run_is_a_failed_run(name, needle, kept, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["pair", "--flwr-app", f"{FIX}{name}", "--out", "run", "--perturb", "none", "--clients-per-round", "4",
            "--pairs", "2", "--rounds", "4", "--quiet"]
    code, out, err = cli(args, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0] and f"rounds 0-{kept} are kept in run" in lines[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["rounds_done"] == kept
    assert sorted(set(pd.read_csv(tmp_path / "run" / "metrics.csv")["round"])) == list(range(kept + 1))
    code, _, err = cli(args, capsys)  # again: refused, naming --resume and --overwrite as for a paired run
    assert code == 2 and "replace it with --overwrite" in err and "stabkit pair --resume run" in err


def test_a_client_app_returning_nan_is_a_diverged_run(tmp_path, capsys):
    code, _, err = cli(["pair", "--flwr-app", f"{FIX}nan_from_round3_app", "--out", str(tmp_path / "run"),
                        "--perturb", "none", "--clients-per-round", "4", "--pairs", "2", "--rounds", "4", "--quiet"],
                       capsys)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 1 and "run diverged (non-finite parameters) at round 3" in err
    assert summary["status"] == "diverged" and summary["diverged_round"] == 3 and summary["rounds_done"] == 2


def test_an_app_run_has_tensorboard_events_and_a_bounds_report(tmp_path, capsys):
    code, _, err = cli(["pair", "--flwr-app", f"{FIX}good_app", "--out", str(tmp_path / "run"), "--tensorboard",
                        str(tmp_path / "tb"), *ARGS], capsys)
    assert code == 0, err
    assert [p.name for p in (tmp_path / "tb").iterdir()] == ["run"]
    assert len(list((tmp_path / "tb" / "run").glob("events.out.tfevents.*"))) == 1
    code, out, err = cli(["bounds", str(tmp_path / "run"), "--bootstrap", "0"], capsys)
    assert code == 0 and "T = 2, 2 pairs" in out and "bounds: not computed: a Flower app" in out, err


SUMMARY_NUMBERS = ("status", "rounds_done", "diverged_round", "final_disc_mean", "final_disc_max", "client_calls",
                   "skipped_rounds")


def _numbers(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    return (run_dir / "metrics.csv").read_bytes(), {k: summary[k] for k in SUMMARY_NUMBERS}


def test_an_app_run_resumes_to_the_bytes_of_an_uninterrupted_one(tmp_path, capsys):
    """A checkpoint after every round: a finished run extended with --rounds, and one stopped by Ctrl-C and
    resumed, write the metrics and summary numbers of the run that went through at once."""
    from stabkit.run.flwr_files import resume_app

    cfg = RunConfig(pairs=2, rounds=4, clients_per_round=2, perturb="client")
    run_app(f"{FIX}good_app", cfg, tmp_path / "full")
    run_app(f"{FIX}good_app", cfg.replace(rounds=2), tmp_path / "short")
    code, out, err = cli(["pair", "--resume", str(tmp_path / "short"), "--rounds", "4", "--quiet"], capsys)
    assert code == 0 and "4 rounds" in out, err

    def stop_at_3(t):
        if t == 3:
            raise KeyboardInterrupt

    cut = run_app(f"{FIX}good_app", cfg, tmp_path / "cut", progress=stop_at_3)
    assert (cut["status"], cut["rounds_done"], cut["interrupted"]) == ("interrupted", 3, "round 4")
    assert resume_app(tmp_path / "cut")["status"] == "completed"
    assert _numbers(tmp_path / "short") == _numbers(tmp_path / "full") == _numbers(tmp_path / "cut")
    assert json.loads((tmp_path / "short" / "config.json").read_text())["rounds"] == 4


def test_an_app_runs_resume_takes_only_rounds_and_refuses_an_edited_config(tmp_path, capsys):
    cfg = RunConfig(pairs=1, rounds=2, clients_per_round=2, perturb="none")
    run_app(f"{FIX}good_app", cfg, tmp_path / "r")
    before = (tmp_path / "r" / "metrics.csv").read_bytes()
    code, _, err = cli(["pair", "--resume", str(tmp_path / "r"), "--seed", "3"], capsys)
    assert code == 2 and "invalid option --seed with --resume of a Flower app run" in err
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    (tmp_path / "r" / "config.json").write_text(json.dumps({**config, "seed": 3}))
    code, _, err = cli(["pair", "--resume", str(tmp_path / "r"), "--rounds", "3"], capsys)
    assert code == 2 and "config.json was edited since the checkpoint; nothing was changed" in err
    assert (tmp_path / "r" / "metrics.csv").read_bytes() == before


@pytest.mark.parametrize("damage,needle", [
    (lambda p: p.write_bytes(p.read_bytes()[:200]), "checkpoint.pt is unreadable, truncated or damaged"),
    (lambda p: p.write_bytes(b""), "checkpoint.pt is empty (0 bytes)"),
    (lambda p: p.unlink(), "no checkpoint.pt there (the run stopped before its first round)"),
])
def test_an_app_runs_damaged_checkpoint_is_refused_as_a_paired_runs_is(tmp_path, capsys, damage, needle):
    """An app run's checkpoint is read by the paired runs' loader: the same one-line refusals, nothing changed."""
    run_app(f"{FIX}good_app", RunConfig(pairs=1, rounds=2, clients_per_round=2, perturb="none"), tmp_path / "r")
    before = (tmp_path / "r" / "metrics.csv").read_bytes()
    damage(tmp_path / "r" / "checkpoint.pt")
    code, _, err = cli(["pair", "--resume", str(tmp_path / "r"), "--rounds", "3"], capsys)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert (tmp_path / "r" / "metrics.csv").read_bytes() == before
