"""A resume continues the experiment its checkpoint was written by, or refuses: the checkpoint records the
values of every experiment-defining field (``stabkit.run.fingerprint``); only the fields documented as safe to
change may differ from ``config.json``, and those do not stop a resume."""
import hashlib
import json
import shutil

import pytest
import torch

from stabkit import RunConfig, TaskOptions, run_pair
from stabkit.run.fingerprint import SAFE_TO_CHANGE, changed_fields, fingerprint
from tests.helpers import cli


def _cfg(**kw):
    base = dict(task="quadratic", pairs=2, rounds=6, local_steps=2, checkpoint_every=3, constants=False,
                sharpness_rounds=(0, 3), task_options=TaskOptions(clients=4, heldout_clients=2, samples_per_client=20))
    return RunConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fp") / "run"
    run_pair(_cfg(), out=out)
    return out


def _hashes(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_fingerprint_holds_every_field_but_the_safe_ones_with_task_options_flat():
    fp = fingerprint(_cfg(lr=0.25))
    assert fp["lr"] == 0.25 and fp["algo"] == "fedavg" and fp["perturb"] == "client"
    assert fp["clients"] == 4 and fp["samples_per_client"] == 20 and fp["data_seed"] == 0
    assert fp["sharpness_rounds"] == [0, 3] and "task_options" not in fp and "seed" in fp
    assert not set(SAFE_TO_CHANGE) & set(fp)
    assert json.loads(json.dumps(fp)) == fp  # survives config.json's JSON round trip


def test_changed_fields_names_each_change_with_both_values():
    recorded = fingerprint(_cfg())
    assert changed_fields(recorded, _cfg()) == []
    assert changed_fields(recorded, _cfg(rounds=60, checkpoint_every=7, save_models="none", constants=True,
                                         device="cpu")) == []
    assert changed_fields(recorded, _cfg(lr=0.5, algo="fedprox")) == ["algo ('fedavg' -> 'fedprox')",
                                                                      "lr (0.05 -> 0.5)"]
    assert changed_fields({**recorded, "retired_field": 1}, _cfg()) == ["retired_field (1 -> None)"]


def test_the_checkpoint_records_the_fingerprint_of_its_run(run):
    ck = torch.load(run / "checkpoint.pt", weights_only=False)
    assert ck["fingerprint"] == fingerprint(RunConfig.from_dict(json.loads((run / "config.json").read_text())))


def test_fields_safe_to_change_resume_and_match_an_uninterrupted_run(run, tmp_path, capsys):
    """checkpoint_every, save_models, constants and device edited in config.json, --rounds extended: the
    resume goes on, and its logs are those of a run made with the new horizon from the start."""
    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed)
    cfg = json.loads((resumed / "config.json").read_text())
    cfg.update(checkpoint_every=2, save_models="none", device="cpu")
    (resumed / "config.json").write_text(json.dumps(cfg))
    code, _, err = cli(["pair", "--resume", str(resumed), "--rounds", "8", "--quiet"], capsys)
    assert code == 0, err
    run_pair(_cfg(rounds=8), out=tmp_path / "straight")
    assert (resumed / "metrics.csv").read_bytes() == (tmp_path / "straight" / "metrics.csv").read_bytes()


@pytest.mark.parametrize("old,new,needle", [
    ("3,", "x,", "sharpness.csv has a round 'x' in line"),
    ("3,", "2.5,", "sharpness.csv has a round '2.5' in line"),
])
def test_a_non_integer_sharpness_round_is_refused_and_nothing_changes(run, tmp_path, capsys, old, new, needle):
    damaged = tmp_path / "run"
    shutil.copytree(run, damaged)
    lines = (damaged / "sharpness.csv").read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.startswith(old))
    lines[i] = new + lines[i][len(old):]
    (damaged / "sharpness.csv").write_text("".join(lines))
    before = _hashes(damaged)
    code, _, err = cli(["pair", "--resume", str(damaged), "--rounds", "9", "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and needle in err and f"in line {i + 1}" in err, err
    assert _hashes(damaged) == before


def test_models_a_file_is_refused_before_a_new_run_writes_anything(tmp_path, capsys):
    out = tmp_path / "new"
    out.mkdir()
    (out / "models").write_text("in the way\n")
    code, _, err = cli(["pair", "--task", "quadratic", "--rounds", "2", "--pairs", "1", "--save-models", "every:1",
                        "--out", str(out), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "models' is a file, not a directory" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["models"]


def test_a_changed_experiment_is_refused_before_the_run_is_built(run, tmp_path, capsys, monkeypatch):
    """The fingerprint is checked on the checkpoint alone: no task, model or engine is built for a resume that
    is refused (the refusal takes the time a checkpoint takes to read)."""
    from stabkit.run import experiment

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "lr": 0.5}))

    def built(*args, **kwargs):
        raise AssertionError("the run was built before the fingerprint was checked")

    monkeypatch.setattr(experiment.PairedRun, "__init__", built)
    code, _, err = cli(["pair", "--resume", str(copy)], capsys)
    assert code == 2 and "lr (0.05 -> 0.5)" in err and err.count("\n") == 1
