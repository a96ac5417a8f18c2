"""``stabkit pair --flwr-app``: a whole Flower app (the example's ClientApp, strategy and initial arrays) paired
end to end, and the app's bad inputs in one table."""
from pathlib import Path

import pandas as pd
import pytest

from stabkit import RunConfig
from stabkit.run.flwr_app import run_app
from tests.cli.test_bad_inputs import check_refused
from tests.helpers import cli

pytest.importorskip("flwr")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flower_digits"
FIX = "tests.flower_fixtures:"
ARGS = ["--pairs", "2", "--rounds", "2", "--clients-per-round", "3", "--quiet"]


@pytest.mark.parametrize("perturb", ["none", "client", "remove-client"])
def test_the_example_app_runs_end_to_end(perturb, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(EXAMPLE)
    code, out, err = cli(["pair", "--flwr-app", "app:stabkit_app", "--perturb", perturb, "--out",
                          str(tmp_path / "run"), *ARGS], capsys)
    assert code == 0, err
    rows = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert list(rows["round"]) == [1, 1, 2, 2] and list(rows["pair"]) == [0, 1, 0, 1]
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
]


@pytest.mark.parametrize("args,needle", APP, ids=[" ".join(a) for a, _ in APP])
def test_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(["pair", *args, "--pairs", "1", "--rounds", "2", "--quiet"], needle, tmp_path, capsys,
                  monkeypatch)


STOPS = [  # a misbehaving ClientApp stops the run at round 1 with one line naming the call
    ("raising_app", "at round 1 (pair 0, trajectory A, node 2): the ClientApp raised ValueError: no data for this "
                    "node"),
    ("extra_key_app", "the reply's arrays are ['w', 'extra'], expected ['w'] (the keys sent)"),
    ("wrong_shape_app", "the reply's array 'w' has shape [2] and dtype float32, expected [3] and float32"),
    ("nondeterministic_app", "the ClientApp is not deterministic under a fixed seed"),
]


@pytest.mark.parametrize("name,needle", STOPS)
def test_a_misbehaving_client_app_stops_in_one_line(name, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["pair", "--flwr-app", f"{FIX}{name}", "--out", "run", "--perturb", "none",
                          "--clients-per-round", "4", *ARGS[:4], "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert list(pd.read_csv(tmp_path / "run" / "metrics.csv").columns)[:3] == ["round", "pair", "disc"]
