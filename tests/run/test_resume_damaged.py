"""A resume that cannot go on refuses with one line and leaves the run directory byte-identical: damaged,
empty or foreign checkpoints, logs shorter than the checkpoint says (no resumed run with a hole in it),
corrupt config files. An earlier checkpoint of the same run is legitimate: it recomputes the later rounds."""
import hashlib
import json
import shutil

import pytest
import torch

from stabkit import RunConfig, TaskOptions, run_pair
from tests.helpers import cli


def _cfg(**kw):
    base = dict(algo="scaffold", task="quadratic", pairs=2, rounds=12, local_steps=3, checkpoint_every=5,
                local_rounds=(0, 8), constants=False, task_options=TaskOptions(clients=8, samples_per_client=20))
    return RunConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The run resumed (finished, checkpoint at round 12), and runs whose checkpoints are swapped in."""
    root = tmp_path_factory.mktemp("runs")
    variants = {"base": {}, "seed1": dict(seed=1), "pairs3": dict(pairs=3), "fedavg": dict(algo="fedavg"),
                "dim7": dict(task_options=TaskOptions(clients=8, samples_per_client=20, quad_dim=7)),
                "clients10": dict(task_options=TaskOptions(clients=10, samples_per_client=20)),
                "float64": dict(dtype="float64"), "ten": dict(rounds=10)}
    for name, kw in variants.items():
        run_pair(_cfg(**kw), out=root / name)
    return root


def _edit_checkpoint(change):
    def edit(run, root):
        ck = torch.load(run / "checkpoint.pt", weights_only=False)
        change(ck)
        torch.save(ck, run / "checkpoint.pt")
    return edit


def _keep_lines(name, lines):
    def edit(run, root):
        text = (run / name).read_text().splitlines(keepends=True)
        (run / name).write_text("".join(text[i] for i in lines(len(text))))
    return edit


def _write(name, data: bytes):
    return lambda run, root: (run / name).write_bytes(data)


def _foreign(variant, fingerprint=False):
    """Another run's checkpoint swapped in; without its fingerprint (as stabkit wrote them before fingerprints)
    unless ``fingerprint``, so the checks of its shapes and initial model are reached."""
    def swap(run, root):
        ck = torch.load(root / variant / "checkpoint.pt", weights_only=False)
        if not fingerprint:
            ck.pop("fingerprint")
        torch.save(ck, run / "checkpoint.pt")
    return swap


def _torch_save(obj):
    return lambda run, root: torch.save(obj, run / "checkpoint.pt")


def _edit_config(**changes):
    def edit(run, root):
        cfg = json.loads((run / "config.json").read_text())
        cfg.update(changes)
        (run / "config.json").write_text(json.dumps(cfg))
    return edit


def _replace_in_line(name, line, old, new):
    def edit(run, root):
        text = (run / name).read_text().splitlines(keepends=True)
        text[line] = text[line].replace(old, new, 1)
        (run / name).write_text("".join(text))
    return edit


def _models_a_file(run, root):
    shutil.rmtree(run / "models")
    (run / "models").write_text("not a directory\n")


def _truncate_checkpoint(run, root):
    data = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(data[: len(data) // 2])


def _checkpoint_dir(run, root):
    (run / "checkpoint.pt").unlink()
    (run / "checkpoint.pt").mkdir()


DAMAGED = [
    ("truncated checkpoint", _truncate_checkpoint, "checkpoint.pt is unreadable, truncated or damaged"),
    ("zero-byte checkpoint", _write("checkpoint.pt", b""), "checkpoint.pt is empty (0 bytes)"),
    ("garbage checkpoint", _write("checkpoint.pt", b"\x80\x04not a pickle" * 50), "unreadable"),
    ("checkpoint is a directory", _checkpoint_dir, "no checkpoint.pt there"),
    ("checkpoint holds a list", _torch_save([1, 2]), "checkpoint.pt holds a list, not a stabkit checkpoint"),
    ("checkpoint holds a string", _torch_save("x"), "holds a str"),
    ("checkpoint of another format", _edit_checkpoint(lambda ck: ck.update(format=2)), "has format 2"),
    ("checkpoint without times", _edit_checkpoint(lambda ck: ck.pop("times")), "checkpoint.pt lacks times"),
    ("checkpoint round beyond its rounds", _edit_checkpoint(lambda ck: ck.update(round=13)), "at round 13 of 12"),
    ("checkpoint with NaN models", _edit_checkpoint(lambda ck: ck["x"].view(-1)[0].fill_(float("nan"))),
     "non-finite global models"),
    ("checkpoint with a bad record", _edit_checkpoint(lambda ck: ck["record"].pop("hit")), "round record"),
    ("checkpoint with bad times", _edit_checkpoint(lambda ck: ck["times"].update(wall_s=float("inf"))),
     "invalid times"),
    ("another run's checkpoint, same shapes", _foreign("seed1"), "belongs to another run"),
    ("another run's checkpoint, more pairs", _foreign("pairs3"), "x (the global models) of shape (3, 2, 10)"),
    ("another algorithm's checkpoint", _foreign("fedavg"), "this run's algorithm 'scaffold' keeps ['c']"),
    ("another model size's checkpoint", _foreign("dim7"), "of shape (2, 2, 7)"),
    ("more clients' checkpoint", _foreign("clients10"), "client_state['c_i'] of shape (2, 2, 16, 10)"),
    ("float64 run's checkpoint", _foreign("float64"), "torch.float64"),
    ("another seed's checkpoint, fingerprinted", _foreign("seed1", True), "seed (1 -> 0)"),
    ("more pairs' checkpoint, fingerprinted", _foreign("pairs3", True), "pairs (3 -> 2)"),
    ("another algorithm's checkpoint, fingerprinted", _foreign("fedavg", True), "algo ('fedavg' -> 'scaffold')"),
    ("another model size's checkpoint, fingerprinted", _foreign("dim7", True), "quad_dim (7 -> 10)"),
    ("float64 run's checkpoint, fingerprinted", _foreign("float64", True), "dtype ('float64' -> 'float32')"),
    ("metrics.csv shorter than the checkpoint", _keep_lines("metrics.csv", lambda n: range(15)),
     "metrics.csv lacks rounds 7-12"),
    ("metrics.csv with a hole", _keep_lines("metrics.csv", lambda n: [i for i in range(n) if i not in (9, 10)]),
     "metrics.csv lacks round 4 "),
    ("metrics.csv only its header", _keep_lines("metrics.csv", lambda n: [0]), "metrics.csv lacks rounds 0-12"),
    ("metrics.csv rows swapped", _keep_lines("metrics.csv", lambda n: [0, 1, 2, 3, 5, 4, *range(6, n)]),
     "does not hold rounds 0-12 in order"),
    ("metrics.csv missing", lambda run, root: (run / "metrics.csv").unlink(), "metrics.csv is missing"),
    ("metrics.csv binary", _write("metrics.csv", bytes(range(256)) * 4), "metrics.csv is not a readable table"),
    ("metrics.csv without a disc column", _write("metrics.csv", b"round,pair\n0,0\n"), "lacks the column disc"),
    ("local.csv only its header", _keep_lines("local.csv", lambda n: [0]), "local.csv lacks local rounds 0, 8"),
    ("local.csv missing", lambda run, root: (run / "local.csv").unlink(), "local.csv is missing"),
    ("config.json: algorithm edited", _edit_config(algo="fedavg"), "algo ('scaffold' -> 'fedavg')"),
    ("config.json: lr edited", _edit_config(lr=0.5), "another experiment than checkpoint.pt was written by: "
     "lr (0.05 -> 0.5); nothing was changed"),
    ("config.json: perturbation edited", _edit_config(perturb="sample"), "perturb ('client' -> 'sample')"),
    ("config.json: three fields edited", _edit_config(lr=0.5, seed=3, local_steps=4),
     "local_steps (3 -> 4); lr (0.05 -> 0.5); seed (0 -> 3)"),
    ("config.json: a task option edited", _edit_config(task_options={"clients": 8, "samples_per_client": 20,
                                                                     "quad_noise": 0.1}),
     "quad_noise (0.5 -> 0.1)"),
    ("config.json: data seed edited", _edit_config(data_seed=9), "data_seed (0 -> 9)"),
    ("config.json: hyperparameter added", _edit_config(hp={"control": "I"}), "hp ({} -> {'control': 'I'})"),
    ("local.csv: a round that is not a number", _replace_in_line("local.csv", 1, "0,", "x,"),
     "local.csv has a round 'x' in line 2, not an integer"),
    ("local.csv: a fractional round", _replace_in_line("local.csv", 3, "0,", "0.5,"),
     "local.csv has a round '0.5' in line 4"),
    ("models/ a regular file", _models_a_file, "/models' is a file, not a directory"),
    ("config.json corrupt", _write("config.json", b"{oops"), "config.json': not valid json"),
    ("config.json binary", _write("config.json", bytes(range(128, 256))), "not valid json"),
    ("config.json a list", _write("config.json", b"[1]"), "expected a mapping"),
]


def _hashes(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("damage,needle", [c[1:] for c in DAMAGED], ids=[c[0] for c in DAMAGED])
def test_failed_resume_refuses_with_one_line_and_changes_nothing(runs, tmp_path, capsys, damage, needle):
    run = tmp_path / "run"
    shutil.copytree(runs / "base", run)
    damage(run, runs)
    before = _hashes(run)
    code, out, err = cli(["pair", "--resume", str(run), "--rounds", "14", "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, out, err)
    assert needle in lines[0], lines[0]
    assert _hashes(run) == before


def test_resume_from_an_earlier_checkpoint_of_the_same_run_recomputes_the_later_rounds(runs, tmp_path, capsys):
    """The logs hold rounds the checkpoint does not cover (a run killed after its last checkpoint): they are
    recomputed, and the result is the uninterrupted run's."""
    run = tmp_path / "run"
    shutil.copytree(runs / "base", run)
    shutil.copy(runs / "ten" / "checkpoint.pt", run / "checkpoint.pt")
    code, _, err = cli(["pair", "--resume", str(run), "--quiet"], capsys)
    assert code == 0, err
    for name in ("metrics.csv", "local.csv"):
        assert (run / name).read_bytes() == (runs / "base" / name).read_bytes(), name
