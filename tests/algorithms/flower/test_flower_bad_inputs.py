"""Bad input to the Flower bridge: one line ``error: ...``, exit status 2, nothing written -- or, for a strategy
that fails mid-run, a clean stop naming the strategy and round that keeps what was logged."""
import json
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
    (["--algo", "flwr:FedTrimmedAvg", "--hp", "beta=0.7"], "invalid hp beta=0.7 for flwr:FedTrimmedAvg"),
    (["--algo", "flwr:Bulyan", "--hp", "num_malicious_nodes=1"],
     "Bulyan with num_malicious_nodes=1 needs at least 4f + 3 = 7 clients per round, got 5"),
    (["--algo", "flwr:FedAvg", "--global-lr", "0.5"], "invalid global_lr=0.5 for flwr:FedAvg: 1"),
    (["--algo", f"{FIX}WrongShape"], "aggregate_train returned an array 'theta' of shape [3] and dtype float32, "
                                     "expected shape [4810] of a float dtype at round 1"),
    (["--algo", f"{FIX}IntegerArrays"], "and dtype int64, expected shape [4810] of a float dtype"),
    (["--algo", f"{FIX}HalfTheCohort"], "configure_train at round 1 addressed nodes"),
    (["--algo", f"{FIX}Unpicklable"], "cannot be checkpointed: pickling its strategy raised"),
    # ranges of the shipped strategies' arguments (params.RANGES), finiteness for every number
    (["--algo", "flwr:Krum", "--hp", "num_malicious_nodes=2"], "Krum with num_malicious_nodes=2 needs at least "
                                                               "2f + 3 = 7 clients per round, got 5"),
    (["--algo", "flwr:MultiKrum", "--hp", "num_malicious_nodes=2"], "MultiKrum with num_malicious_nodes=2"),
    (["--algo", "flwr:FedAvgM", "--hp", "server_momentum=nan"], "invalid hp server_momentum=nan for flwr:FedAvgM: "
                                                                "a number in [0, 1)"),
    (["--algo", "flwr:FedAdam", "--hp", "eta=-1"], "invalid hp eta=-1.0 for flwr:FedAdam: a number in (0, inf)"),
    (["--algo", "flwr:FedAdam", "--hp", "beta_1=1"], "beta_1=1.0"),
    (["--algo", "flwr:FedProx", "--hp", "proximal_mu=-0.1"], "proximal_mu=-0.1"),
    (["--algo", "flwr:FedTrimmedAvg", "--hp", "beta=0.5"], "invalid hp beta=0.5 for flwr:FedTrimmedAvg: a number "
                                                           "in [0, 0.5)"),
    (["--algo", DP, "--hp", "strategy=FedAvg", "--hp", "noise_multiplier=-1", "--hp", "clipping_norm=1"],
     "noise_multiplier=-1.0"),
    (["--algo", DP, "--hp", "strategy=FedAvg", "--hp", "noise_multiplier=1", "--hp", "clipping_norm=inf"],
     "clipping_norm=inf"),
    (["--algo", f"{FIX}UnseededGenerator", "--perturb", "none"], "not deterministic at round 1 (pair 0)"),
    # legacy twins refused up front; an inner strategy of the other API and --wrap refused by name
    (["--algo", "flwr:flwr.server.strategy:QFedAvg"], "the bridge does not drive QFedAvg"),
    (["--algo", "flwr:flwr.server.strategy:FedXgbBagging"], "the bridge does not drive FedXgbBagging"),
    (["--algo", DP, "--hp", "strategy=flwr.server.strategy:FedAvg", "--hp", "noise_multiplier=1", "--hp",
      "clipping_norm=1"], "needs an inner strategy of the same API; FedAvg is a legacy flwr.server.strategy"),
    (["--algo", "flwr:flwr.server.strategy:DPFedAvgFixed", "--hp", "strategy=FedAvg", "--hp", "clip_norm=1"],
     "DPFedAvgFixed is a legacy flwr.server.strategy wrapper"),
    (["--algo", "flwr:FedAvg", "--wrap", "dp:clip=1,noise_multiplier=1"], "invalid wrap='dp:clip=1,noise_multiplier"
                                                                          "=1' with algo='flwr:FedAvg'"),
]


@pytest.mark.parametrize("args,needle", FLOWER, ids=[" ".join(a) for a, _ in FLOWER])
def test_pair(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(["pair", *args, *BASE], needle, tmp_path, capsys, monkeypatch)


def test_without_flower_installed_is_one_line_naming_the_install_command(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "flwr", None)
    check_refused(["pair", "--algo", "flwr:FedAvg", *BASE], 'pip install -e ".[flower]"', tmp_path, capsys,
                  monkeypatch)


@pytest.mark.parametrize("name,line", [
    ("RaisesAtRound2", "aggregate_train raised RuntimeError: boom at round 2 (pair 0, trajectory A); rounds 0-1 are "
                       "kept in run"),
    ("UrandomFromRound3", "not deterministic at round 3 (pair 0): its two copies, handed the same model and the same "
                          "replies"),
])
def test_a_strategy_that_fails_mid_run_is_a_failed_run_with_its_rounds_kept(tmp_path, capsys, monkeypatch, name,
                                                                             line):
    """One failure record for every kind of run: summary.json says failed and why, the line which rounds are kept
    (a strategy drawing from os.urandom from round 3 on is caught at round 3 of the null pair)."""
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(["pair", "--algo", f"{FIX}{name}", "--out", "run", "--perturb", "none", "--rounds", "4", *BASE[2:]],
                         capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and line in lines[0], err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    kept = int(line.split("rounds 0-")[1][0]) if "rounds 0-" in line else 2
    assert summary["status"] == "failed" and summary["rounds_done"] == kept and line.split(";")[0] in \
        summary["failed_reason"]
    assert sorted(set(pd.read_csv(tmp_path / "run" / "metrics.csv")["round"])) == list(range(kept + 1))


def test_a_strategy_returning_nan_is_a_diverged_run(tmp_path, capsys):
    code, _, err = cli(["pair", "--algo", f"{FIX}NanAtRound2", "--out", str(tmp_path / "run"), *BASE], capsys)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert code == 1 and "diverged (non-finite parameters) at round 2" in err
    assert summary["status"] == "diverged" and summary["diverged_round"] == 2


def test_bounds_reads_a_flower_run(tmp_path, capsys):
    assert cli(["pair", "--algo", "flwr:FedAvg", "--out", str(tmp_path / "run"), *BASE], capsys)[0] == 0
    code, out, err = cli(["bounds", str(tmp_path / "run"), "--bootstrap", "0"], capsys)
    assert code == 0 and "flwr:FedAvg, --perturb client, T = 3, 2 pairs" in out, err
