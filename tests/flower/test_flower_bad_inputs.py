"""Bad input to the Flower bridge: one line ``error: ...``, exit status 2, nothing written -- or, for a strategy
that fails mid-run, a clean stop naming the strategy and round that keeps what was logged."""
import sys

import pandas as pd
import pytest

from tests.cli.test_bad_inputs import check_refused
from tests.helpers import cli

pytest.importorskip("flwr")

FIX = "flwr:tests.flower_fixtures:"
DP = "flwr:DifferentialPrivacyServerSideFixedClipping"
BASE = ["--rounds", "3", "--pairs", "2", "--clients-per-round", "5", "--no-constants", "--quiet"]

FLOWER = [
    (["--algo", "flwr:Nope"], "flwr.serverapp.strategy has no strategy 'Nope': one of Bulyan,"),
    (["--algo", "flwr:QFedAvg"], "the bridge does not drive QFedAvg: it weighs clients by their training loss"),
    (["--algo", "flwr:FedXgbBagging"], "it aggregates XGBoost trees"),
    (["--algo", f"{FIX}NotAStrategy"], "is not a concrete flwr.serverapp.strategy.Strategy subclass (Message API: "
                                       "configure_train, aggregate_train) nor a legacy flwr.server.strategy.Strategy"),
    (["--algo", "flwr:no_such_module:Strategy"], "no module named 'no_such_module'"),
    (["--algo", DP, "--hp", "strategy=FedAvg", "--hp", "clipping_norm=1"],
     "its constructor needs noise_multiplier (--hp noise_multiplier=VALUE, float)"),
    (["--algo", "flwr:Krum", "--hp", "num_malicious_nodes=1.5"],
     "invalid hp num_malicious_nodes=1.5 for flwr:Krum: expected int"),
    (["--algo", "flwr:FedAdam", "--hp", "eta=fast"], "invalid hp eta='fast' for flwr:FedAdam: expected float"),
    (["--algo", "flwr:FedAvg", "--hp", "momentum=0.9"], "invalid hyperparameter 'momentum' for flwr:FedAvg"),
    (["--algo", DP, "--hp", "strategy=Nope", "--hp", "noise_multiplier=1", "--hp", "clipping_norm=1"],
     "has no strategy 'Nope'"),
    (["--algo", "flwr:FedTrimmedAvg", "--hp", "beta=0.7"], "FedTrimmedAvg(fraction_train, min_train_nodes, "
                                                            "min_available_nodes, beta) raised ValueError"),
    (["--algo", "flwr:Bulyan", "--hp", "num_malicious_nodes=1"],
     "Bulyan with num_malicious_nodes=1 needs at least 4f + 3 = 7 clients per round, got 5"),
    (["--algo", "flwr:FedAvg", "--global-lr", "0.5"], "invalid global_lr=0.5 for flwr:FedAvg: 1"),
    (["--algo", f"{FIX}WrongShape"], "aggregate_train returned an array 'theta' of shape [3] and dtype float32, "
                                     "expected shape [4810] of a float dtype at round 1"),
    (["--algo", f"{FIX}IntegerArrays"], "and dtype int64, expected shape [4810] of a float dtype"),
    (["--algo", f"{FIX}HalfTheCohort"], "configure_train at round 1 addressed nodes"),
    (["--algo", f"{FIX}Unpicklable"], "cannot be checkpointed: pickling its strategy raised"),
]


@pytest.mark.parametrize("args,needle", FLOWER, ids=[" ".join(a) for a, _ in FLOWER])
def test_pair(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(["pair", *args, *BASE], needle, tmp_path, capsys, monkeypatch)


def test_without_flower_installed_is_one_line_naming_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr", None)
    check_refused(["pair", "--algo", "flwr:FedAvg", *BASE], 'pip install -e ".[flower]"', tmp_path, capsys,
                  monkeypatch)


def test_a_strategy_that_raises_mid_run_stops_cleanly_and_keeps_the_log(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["pair", "--algo", f"{FIX}RaisesAtRound2", "--out", "run", *BASE], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0] == ("error: flwr:tests.flower_fixtures:RaisesAtRound2: aggregate_train raised RuntimeError: "
                        "boom at round 2 (pair 0, trajectory A)")
    logged = pd.read_csv(tmp_path / "run" / "metrics.csv")
    assert sorted(set(logged["round"])) == [0, 1]
