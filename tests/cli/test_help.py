"""Help a person reads: `stabkit pair`'s options under titled sections, fixed choices shown and refused in one
line, an example in every subcommand's help that parses, the command list untruncated, one meaning per option
name across subcommands, and an old spelling kept one release with a one-line notice."""
import re
import shlex

import click
import pytest

from stabkit_cli.help import OTHER, Choice, Sectioned
from stabkit_cli.main import cli as group
from tests.helpers import cli

COMMANDS = sorted(group.commands)
# an option name that several subcommands share means one thing: its help text starts with that meaning
MEANINGS = {"--out": "output folder", "--format": "printed output", "--workers": "local executor: parallel processes",
            "--quiet": "no progress display"}


def _help(name: str) -> str:
    command = group.commands[name]
    with click.Context(command, info_name=name, parent=click.Context(group, info_name="stabkit")) as ctx:
        return command.get_help(ctx)


def test_pair_options_are_in_titled_sections_and_none_is_left_over():
    pair = group.commands["pair"]
    assert isinstance(pair, Sectioned)
    titles = [t.lower() for t, _ in pair.sections]
    for wanted in ("run", "federation", "optimisation", "privacy", "output"):
        assert any(t.startswith(wanted) for t in titles), wanted
    ctx = click.Context(pair)
    help_option = pair.get_help_option(ctx)
    assert {p.name for p in pair.get_params(ctx) if p is not help_option and pair.section_of(p) == OTHER} == set()
    text = _help("pair")
    assert f"\n{OTHER}:" not in text and "\nRun: what is measured:\n  --algo" in text
    assert text.index("\nOptimisation:") < text.index("  --lr FLOAT") < text.index("\nPrivacy:")


def test_an_option_in_no_section_is_still_listed():
    @click.command(cls=Sectioned, sections=[("Main", ["a"])])
    @click.option("--a")
    @click.option("--b-new", help="added later")
    def command(a, b_new):
        """Does nothing."""

    with click.Context(command, info_name="x") as ctx:
        text = command.get_help(ctx)
    assert text.index("Main:\n  --a") < text.index(f"{OTHER}:\n  --b-new TEXT  added later")


def test_fixed_choices_are_click_choices_from_the_validated_tuples():
    from stabkit.config.runconfig import PERTURBATIONS, RunConfig
    from stabkit.config.taskoptions import SCHEMES

    params = {p.name: p for p in group.commands["pair"].params}
    assert tuple(params["perturb"].type.choices) == PERTURBATIONS
    assert tuple(params["partition"].type.choices) == SCHEMES
    for name in ("client_mode", "dtype", "dp_noise", "augment", "weight_decay_placement", "ri_aggregation"):
        assert isinstance(params[name].type, Choice), name
        assert params[name].default in params[name].type.choices  # the dataclass default is one of them
    assert f"--perturb [{'|'.join(PERTURBATIONS)}]" in _help("pair")
    assert f"--partition [{'|'.join(SCHEMES)}]" in _help("pair")
    assert RunConfig().perturb in PERTURBATIONS
    for command, option in (("bounds", "fmt"), ("audit", "fmt"), ("privacy", "fmt"), ("report", "fmt"),
                            ("atlas", "suite"), ("atlas", "executor"), ("sweep", "executor")):
        param = next(p for p in group.commands[command].params if p.name == option)
        assert isinstance(param.type, Choice), (command, option)


@pytest.mark.parametrize("args,needle", [
    (["pair", "--partition", "random"], "invalid partition='random': one of iid, dirichlet, shards"),
    (["bounds", "run", "--format", "xml"], "invalid format='xml': one of table, csv, json"),
    (["report", "sw", "--table-format", "xlsx"], "invalid table_format='xlsx': one of csv, parquet"),
    (["sweep", "--out", "sw", "--axis", "seed=0,1", "--executor", "dask"], "invalid executor='dask': one of local, ray"),
])
def test_a_value_outside_the_choices_is_refused_in_one_line(args, needle, capsys):
    code, out, err = cli(args, capsys)
    assert code == 2 and err.strip() == f"error: {needle}" and not out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_subcommand_shows_an_example_that_parses(name):
    text = _help(name)
    examples = re.findall(r"^\s+(stabkit .+)$", text.split("\nOptions:")[0].split("\n\n", 1)[1], re.M)
    assert "Example" in text and examples, f"stabkit {name} --help has no example"
    for line in examples:
        args = shlex.split(line)
        assert args[:2] == ["stabkit", name], line
        command = group.commands[name]
        command.make_context(name, args[2:], parent=click.Context(group, info_name="stabkit"))  # parses, converts


def test_top_level_help_gives_every_first_sentence_whole(capsys):
    code, out, _ = cli(["--help"], capsys)
    flat = " ".join(out.split())
    assert code == 0 and "..." not in out.split("\nCommands:")[1]
    for name in COMMANDS:
        first = group.commands[name].get_short_help_str(limit=10_000)
        assert f"{name} {' '.join(first.split())}" in flat, name


@pytest.mark.parametrize("option", sorted(MEANINGS))
def test_an_option_name_means_one_thing_in_every_subcommand(option):
    found = []
    for name in COMMANDS:
        for param in group.commands[name].params:
            if option in getattr(param, "opts", []) and not getattr(param, "hidden", False):
                found.append(name)
                assert param.help.startswith(MEANINGS[option]), (name, option, param.help)
    assert len(found) >= 2, found


def test_report_format_is_table_format_now_and_the_old_spelling_still_works(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(["sweep", "--out", "sw", "--axis", "seed=0", "--set", "task=quadratic", "--set", "rounds=2",
                        "--set", "pairs=1", "--set", "constants=false", "--quiet"], capsys)
    assert code == 0, err
    code, out, err = cli(["report", "sw", "--out", "new", "--table-format", "csv", "--no-plot"], capsys)
    assert code == 0 and err == "", err
    code, out, err = cli(["report", "sw", "--out", "old", "--format", "csv", "--no-plot"], capsys)
    assert code == 0 and err.strip() == ("note: --format is deprecated and will be removed in the next release; use "
                                         "--table-format (--format names what a command prints)")
    assert (tmp_path / "old" / "metrics.csv").read_bytes() == (tmp_path / "new" / "metrics.csv").read_bytes()
    assert "--format" not in _help("report")
