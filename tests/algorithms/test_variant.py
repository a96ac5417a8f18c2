"""Named variants (stabkit.algorithms.variant): ``NAME[KEY=VALUE,...]`` is the algorithm with those
hyperparameters fixed; a run of the variant is the run of its base with ``--hp``, bit for bit."""
import json

import pytest

from stabkit import RunConfig
from stabkit.algorithms import algorithm_class, build_algorithm, is_builtin, resolve_hp
from stabkit.algorithms.variant import split_variant
from stabkit.analysis.run_analysis import analyze
from stabkit.atlas.names import algo_title
from stabkit.errors import ConfigError
from stabkit.keyvalue import scalar
from stabkit.run.experiment import run_pair
from tests.helpers import cli


def test_a_variant_is_its_base_with_the_values_fixed():
    assert split_variant("dp_fedavg[noise_multiplier=3, clip=0.5]") == ("dp_fedavg", {"noise_multiplier": 3,
                                                                                      "clip": 0.5})
    assert split_variant("flwr:FedAvg") == ("flwr:FedAvg", {})
    assert algorithm_class("fedprox[lam=0.1]") is algorithm_class("fedprox")
    assert build_algorithm("fedprox[lam=0.1]").p == build_algorithm("fedprox", {"lam": 0.1}).p
    assert resolve_hp("dp_fedavg[noise_multiplier=3]", {"clip": 0.5}) == {"clip": 0.5, "noise_multiplier": 3}
    assert is_builtin("dp_fedavg[noise_multiplier=3]") and not is_builtin("pkg.mod:Algo[x=1]")
    assert algo_title("dp_fedavg[noise_multiplier=3]") == "DP-FedAvg (noise_multiplier = 3)"
    assert [scalar(t) for t in ("none", "3", "0.5", "abc")] == [None, 3, 0.5, "abc"]


@pytest.mark.parametrize("name, says", [
    ("dp_fedavg[", "a variant is NAME[KEY=VALUE,...]"),
    ("dp_fedavg[]", "fixes at least one hyperparameter"),
    ("dp_fedavg[noise_multiplier]", "expected KEY=VALUE items"),
    ("dp_fedavg[clip=1,clip=2]", "each key once"),
    ("dp_fedavg[foo=1]", "invalid hyperparameter 'foo' for dp_fedavg"),
    ("dp_fedavg[noise_multiplier=-1]", "invalid noise_multiplier=-1"),
    ("nope[x=1]", "invalid algo='nope'"),
])
def test_a_bad_variant_is_one_line(name, says):
    with pytest.raises(ConfigError, match=None) as e:
        algorithm_class(name)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_hp_may_add_to_a_variant_but_not_contradict_it():
    with pytest.raises(ConfigError, match="fixes noise_multiplier=3"):
        build_algorithm("dp_fedavg[noise_multiplier=3]", {"noise_multiplier": 2})
    assert build_algorithm("dp_fedavg[noise_multiplier=3]", {"noise_multiplier": 3}).p.noise_multiplier == 3


def test_a_run_of_a_variant_is_the_run_of_its_base_with_hp(tmp_path):
    common = dict(task="quadratic", rounds=4, pairs=2, constants=False)
    run_pair(RunConfig(algo="dp_fedavg[noise_multiplier=2]", **common), tmp_path / "a")
    run_pair(RunConfig(algo="dp_fedavg", hp={"noise_multiplier": 2}, **common), tmp_path / "b")
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == (tmp_path / "b" / "metrics.csv").read_bytes()
    eps = [json.loads((tmp_path / r / "privacy.json").read_text())["epsilon_accountant"] for r in "ab"]
    assert eps[0] == eps[1] > 0


def test_the_cli_runs_a_variant(tmp_path, capsys):
    out = tmp_path / "run"
    code, _, err = cli(["pair", "--algo", "fedprox[lam=0.05]", "--task", "quadratic", "--rounds", "2", "--pairs",
                        "2", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    config = json.loads((out / "config.json").read_text())
    assert config["algo"] == "fedprox[lam=0.05]" and config["hp_resolved"]["lam"] == 0.05
    bounds = {r["bound"] for r in analyze(out, bootstrap=0).bound_rows()}  # a variant has its base's bounds
    assert "fedsagd:fedprox.paper" in bounds and "fedsagd:fedprox.corrected" in bounds
