"""One algorithm spec (stabkit.algorithms.spec.AlgoSpec) and one composition (stabkit.algorithms.compose): every
``KEY=VALUE`` surface reads a text to the same typed value, a run's spec is recorded whole in config.json and read
back to the same spec, the wrappers go around the base in their listed order, and a wrapped DP algorithm still
reports what it needs."""
import json
import math

import click
import pytest

from stabkit import RunConfig
from stabkit.algorithms import compose
from stabkit.algorithms.base import CLIENT_SENSITIVITIES, Wrapper
from stabkit.algorithms.dp import DP, DPParams
from stabkit.algorithms.relaxed_init import RelaxedInit
from stabkit.algorithms.spec import AlgoSpec
from stabkit.algorithms.variant import split_variant
from stabkit.algorithms.wrap import WRAPPERS, parse_wrap
from stabkit.atlas.tuning import parse_tune
from stabkit.errors import ConfigError
from stabkit_cli.pair import build_config, pair
from stabkit_cli.sweep import _shorthand
from tests.helpers import cli

# text -> the value every surface reads it as (YAML 1.1 would read 1e-3 as text; --hp once read true as text)
TEXTS = [("1", 1), ("2.5", 2.5), ("1e-3", 0.001), ("true", True), ("False", False), ("none", None),
         ("null", None), (".inf", math.inf), ("abc", "abc"), ("[0, 20]", [0, 20])]


def _pair_hp(text: str):
    """``stabkit pair --hp x=TEXT``'s hyperparameter, as the command builds its configuration."""
    ctx = pair.make_context("pair", ["--hp", f"x={text}"])
    command_only = ("hp_items", "config_path", "preset", "resume_dir", "estimate", "out", "overwrite", "quiet",
                    "label", "tensorboard", "flwr_app", "verbose")
    params = {k: v for k, v in ctx.params.items() if k not in command_only}
    explicit = {k for k in params if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT}
    return build_config(params, explicit, None, ctx.params["hp_items"]).hp["x"]


SURFACES = {
    "--hp": _pair_hp,
    "NAME[K=V]": lambda text: split_variant(f"fedavg[x={text}]")[1]["x"],
    "--set": lambda text: _shorthand([f"x={text}"], [])["base"]["x"],
    "--axis": lambda text: _shorthand([], [f"x={text},{text}"])["product"]["x"][0],
    "algo_spec": lambda text: AlgoSpec.parse(f"fedavg[x={text}]").hp["x"],
}


BRACKETED = ("NAME[K=V]", "algo_spec")  # a variant's brackets hold no list: NAME[K=V,...] splits at commas
CASES = [(surface, text, expected) for surface in SURFACES for text, expected in TEXTS
         if not (text.startswith("[") and surface in BRACKETED)]


@pytest.mark.parametrize("surface,text,expected", CASES, ids=[f"{s} {t}" for s, t, _ in CASES])
def test_a_key_value_text_is_the_same_typed_value_on_every_surface(surface, text, expected):
    got = SURFACES[surface](text)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("text,expected", [("1", 1), ("2.5", 2.5), ("1e-3", 0.001)])
def test_the_wrap_and_tune_options_read_numbers_as_the_others_do(text, expected):
    """``--wrap dp:clip=1`` is the integer 1 as ``dp_fedavg[clip=1]`` is; ``--tune`` reads its grid with the same
    reader (a grid of rates, kept as floats)."""
    got = parse_wrap(f"dp:clip={text}")[1]["clip"]
    assert got == split_variant(f"dp_fedavg[clip={text}]")[1]["clip"] == expected and type(got) is type(expected)
    assert parse_tune(f"hp.x={text}", "ci").grid == (float(expected),)


def test_a_run_records_its_spec_whole_and_reads_it_back(tmp_path, capsys):
    out = tmp_path / "r"
    code, _, err = cli(["pair", "--algo", "fedprox[lam=0.5]", "--ri-beta", "0.25", "--wrap", "dp:clip=2",
                        "--task", "quadratic", "--rounds", "1", "--pairs", "1", "--no-constants", "--out", str(out),
                        "--quiet"], capsys)
    assert code == 0, err
    recorded = json.loads((out / "config.json").read_text())
    assert recorded["algo_spec"] == {"base": "fedprox", "hp": {"lam": 0.5},
                                     "wrappers": [["ri", {"beta": 0.25, "aggregation": "model_avg"}],
                                                  ["dp", {"clip": 2}]]}
    spec = AlgoSpec.from_dict(recorded["algo_spec"])
    assert spec == RunConfig.from_dict(recorded).algo_spec  # parse -> config.json -> parse: the same spec
    assert compose(spec).name == "fedprox+ri+dp"
    assert recorded["hp_resolved"] == {"lam": 0.5}  # FedProx's one hyperparameter


def test_compose_puts_the_wrappers_around_the_base_in_their_listed_order():
    spec = RunConfig(algo="fedavg", ri_beta=0.1, ri_aggregation="delta_from_init",
                     wrap="dp:clip=0.5,noise_multiplier=2").algo_spec
    assert spec == AlgoSpec("fedavg", {}, (("ri", {"beta": 0.1, "aggregation": "delta_from_init"}),
                                           ("dp", {"clip": 0.5, "noise_multiplier": 2})))
    assert list(WRAPPERS) == ["ri", "dp"]  # innermost first: DP clips the uploads as the server receives them
    algo = compose(spec)
    assert type(algo) is DP and type(algo.inner) is RelaxedInit and algo.inner.inner.name == "fedavg"
    assert (algo.inner.p.beta, algo.inner.p.aggregation, algo.p.clip, algo.p.noise_multiplier) == \
        (0.1, "delta_from_init", 0.5, 2)
    with pytest.raises(ConfigError, match=r"each wrapper once, innermost first in the order ri, dp"):
        AlgoSpec.from_dict({"base": "fedavg", "hp": {}, "wrappers": [["dp", {}], ["ri", {"beta": 0.1}]]})
    with pytest.raises(ConfigError, match=r"invalid algo_spec wrapper \['sam', \{\}\]"):
        AlgoSpec.from_dict({"base": "fedavg", "hp": {}, "wrappers": [["sam", {}]]})
    with pytest.raises(ConfigError, match="relaxed initialisation would act on the clipped uploads"):
        compose(AlgoSpec("dp_fedavg", {}, (("ri", {"beta": 0.1}),)))


def test_a_wrapped_dp_algorithm_still_reports_its_needs_and_its_parameters():
    class Outer(Wrapper):
        tag, tag_title = "outer", "Outer"

    dp = compose(AlgoSpec.parse("fedsam", wrap="dp:clip=3,noise_multiplier=0.5"))
    for algo in (dp, Outer(inner=dp), compose(AlgoSpec.parse("dp_fedavg[clip=3,noise_multiplier=0.5]"))):
        assert algo.requires() == {CLIENT_SENSITIVITIES}
        assert algo.dp_params() == DPParams(clip=3, noise_multiplier=0.5)
    plain = compose(AlgoSpec.parse("fedsam", ri_beta=0.2))
    assert plain.requires() == frozenset() and plain.dp_params() is None
