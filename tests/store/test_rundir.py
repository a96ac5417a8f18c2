"""``RunDir``: the one owner of a run directory. Its readers against a real run, a damaged file's one-line error,
the format version (recorded; an old run without one reads as version 1), the kind of run, the atlas and the
sweep report reading each job once, and the rule that no run-file name is a literal outside ``stabkit/store``."""
import ast
import json
import shutil
from pathlib import Path

import pytest

from stabkit import ConfigError, RunConfig, run_pair
from stabkit.analysis.run_analysis import analyze
from stabkit.store import rundir as rundir_module
from stabkit.store.rundir import FLOWER_APP, FORMAT_VERSION, PAIRED, SWEEP_JOB, VERSION_KEY, RunDir
from stabkit.store.runstore import prepare_run_dir

ROOT = Path(__file__).resolve().parents[2]
ROUNDS, PAIRS, LOCAL_ROUND, K = 3, 2, 1, 2


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("rundir") / "run"
    run_pair(RunConfig(rounds=ROUNDS, pairs=PAIRS, hidden=8, local_rounds=(LOCAL_ROUND,), local_steps=K,
                       constants=True), out=out)
    return out


@pytest.fixture
def copy(run_dir, tmp_path):
    """A copy of the module's run, free to damage."""
    return Path(shutil.copytree(run_dir, tmp_path / "run"))


def test_each_reader_gives_what_the_run_wrote(run_dir):
    run = RunDir(run_dir)
    written = json.loads((run_dir / "config.json").read_text())
    assert dict(run.config) == written and written[VERSION_KEY] == FORMAT_VERSION == run.format_version
    assert RunConfig.from_dict(run.config).rounds == ROUNDS  # the version is a fact: a config read back ignores it
    assert run.summary["status"] == "completed" and run.summary["rounds_done"] == ROUNDS
    df = run.metrics()
    assert list(df["round"]) == [t for t in range(ROUNDS + 1) for _ in range(PAIRS)]
    assert list(df["pair"]) == list(range(PAIRS)) * (ROUNDS + 1)
    assert df.attrs["config"] is run.config and df.attrs["summary"] is run.summary
    local = run.local()
    assert set(local["round"]) == {LOCAL_ROUND} and len(local) == (K + 1) * PAIRS  # steps k = 0..K, every pair
    assert set(run.constants) >= {"L", "G", "snapshot_rounds"}
    assert run.privacy is None and run.sharpness() is None  # no DP layer, no --sharpness-rounds
    assert run.kind == PAIRED


def test_each_file_is_read_once_and_a_write_through_it_is_seen(copy, monkeypatch):
    reads = []
    real = rundir_module.read_json
    monkeypatch.setattr(rundir_module, "read_json", lambda path, what: reads.append(Path(path).name) or real(path, what))
    run = RunDir(copy)
    for _ in range(3):
        run.config, run.summary, run.constants, run.privacy, run.metrics()
    assert sorted(reads) == ["config.json", "constants.json", "summary.json"]
    (copy / "constants.json").write_text('{"G": 5.0}')  # written behind its back: the reading stays
    assert run.constants["G"] != 5.0
    run.write_privacy({"delta": 1e-5})  # written through it: read again
    assert run.privacy == {"delta": 1e-5} and run.constants == {"G": 5.0}
    first = run.metrics()
    first["disc"] = 0.0  # a caller changing its frame does not change the next caller's
    assert (run.metrics()["disc"] > 0).any()


@pytest.mark.parametrize("name,attr", [("config.json", "config"), ("summary.json", "summary"),
                                       ("constants.json", "constants"), ("privacy.json", "privacy")])
@pytest.mark.parametrize("content,needle", [('{"rounds": ', "not valid json"), ("[1, 2]", "expected a mapping")])
def test_a_damaged_file_is_one_line_naming_it(copy, name, attr, content, needle):
    (copy / name).write_text(content)
    with pytest.raises(ConfigError) as e:
        getattr(RunDir(copy), attr)
    message = str(e.value)
    assert len(message.splitlines()) == 1 and f"{name}'" in message and needle in message, message


def test_a_missing_config_or_metrics_names_what_a_run_directory_holds(tmp_path):
    with pytest.raises(ConfigError, match=r"^invalid run='.*': expected a run directory containing config.json$"):
        RunDir(tmp_path).config
    with pytest.raises(ConfigError, match=r"^invalid resume='.*': expected a run directory containing metrics.csv$"):
        RunDir(tmp_path, "resume").metrics()
    assert RunDir(tmp_path).summary is None and RunDir(tmp_path).local() is None  # optional files: absent is None


def test_a_run_without_a_version_is_version_1_and_still_loads(copy, run_dir):
    config = json.loads((copy / "config.json").read_text())
    del config[VERSION_KEY]
    (copy / "config.json").write_text(json.dumps(config))
    run = RunDir(copy)
    assert run.format_version == 1 and run.kind == PAIRED
    old, new = analyze(run, bootstrap=0), analyze(run_dir, bootstrap=0)
    assert old.fit.best == new.fit.best and old.fit.delta_bic == new.fit.delta_bic
    assert [(b["bound"], b["bound_T"]) for b in old.bound_rows()] == [(b["bound"], b["bound_T"]) for b in new.bound_rows()]


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "2", True])
def test_a_version_this_stabkit_cannot_read_is_refused(copy, version):
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, VERSION_KEY: version}))
    with pytest.raises(ConfigError, match=rf"records format_version={version!r}; this stabkit reads versions 1 to "
                                          rf"{FORMAT_VERSION}"):
        RunDir(copy).metrics()


def test_kind_of_a_sweep_job_and_a_flower_app(tmp_path):
    from stabkit.sweep.job import execute_job

    result = execute_job(RunConfig(rounds=1, pairs=1, hidden=4, constants=False).to_dict())
    job = RunDir(tmp_path / "job")
    job.path.mkdir()
    job.write_files(result["files"])
    assert job.kind == SWEEP_JOB and job.format_version == FORMAT_VERSION and len(job.metrics()) == 2
    pytest.importorskip("flwr")
    from stabkit.run.flwr_files import run_app

    run_app("tests.flower_fixtures:good_app", RunConfig(pairs=1, rounds=1, clients_per_round=2), tmp_path / "app")
    app = RunDir(tmp_path / "app")
    assert app.kind == FLOWER_APP and app.format_version == FORMAT_VERSION and app.summary["rounds_done"] == 1


def test_overwrite_removes_every_file_and_folder_of_the_layout(copy):
    RunDir(copy).write_privacy({"delta": 1e-5})
    (copy / "figures").mkdir()
    (copy / "notes.txt").write_text("mine")
    prepare_run_dir(copy, overwrite=True)
    assert sorted(p.name for p in copy.iterdir()) == ["notes.txt"]


def test_the_atlas_reads_a_job_once(copy, monkeypatch):
    """``_read_job`` reads the job's files and its analysis shares that reading: every file read once."""
    from stabkit.atlas.cells import _read_job

    root = copy.parent / "sweep"
    (root / "jobs").mkdir(parents=True)
    shutil.move(copy, root / "jobs" / "j")
    reads = []
    real_json, real_metrics = rundir_module.read_json, RunDir._read_metrics
    monkeypatch.setattr(rundir_module, "read_json", lambda path, what: reads.append(Path(path).name) or
                        real_json(path, what))
    monkeypatch.setattr(RunDir, "_read_metrics", lambda self: reads.append("metrics.csv") or real_metrics(self))
    job = _read_job(root, "j", {"params": {}, "state": "done"})
    assert job.bounds and job.curves.shape == (PAIRS, ROUNDS + 1)  # analysed, not skipped
    assert sorted(reads) == ["config.json", "constants.json", "metrics.csv", "summary.json"]


# -- no run-file name outside stabkit/store -------------------------------------------------------------------
def _docstrings(tree) -> set:
    kinds = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {id(node.body[0].value) for node in ast.walk(tree) if isinstance(node, kinds) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def run_file_literals(source: str) -> list:
    """``(line, literal)`` of each string in ``source`` (docstrings aside) that names a run's file (or a model
    file), or a run's folder joined into a path (``x / "models"``: a bare word elsewhere is a dict key)."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    joined = {id(node.right) for node in ast.walk(tree) if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            v = node.value.strip()
            if (v in RunDir.FILES or v.startswith(tuple(f + "/" for f in RunDir.FOLDERS))
                    or v.endswith(".pt") and v.startswith(("model", "pair")) or v in RunDir.FOLDERS and id(node) in joined):
                found.append((node.lineno, node.value))
    return sorted(found)


def test_the_scanner_finds_run_file_literals_and_skips_docstrings():
    source = ('"""Reads config.json."""\nimport x\n\ndef f(out):\n    """Writes metrics.csv."""\n'
              '    a = out / "metrics.csv"\n    b = {"models": 1}\n    c = out / "models"\n    d = "model_final.pt"\n'
              '    e = "models/round_1"\n    raise ValueError(f"{out}: summary.json is damaged")\n')
    assert run_file_literals(source) == [(6, "metrics.csv"), (8, "models"), (9, "model_final.pt"),
                                         (10, "models/round_1")]


def test_no_run_file_name_is_a_literal_outside_the_store():
    files = [p for p in sorted((ROOT / "stabkit").rglob("*.py")) + sorted((ROOT / "cli").rglob("*.py"))
             if (ROOT / "stabkit" / "store") not in p.parents]
    assert len(files) > 100  # the whole package was read
    found = [f"{p.relative_to(ROOT)}:{line}: {text!r}" for p in files for line, text in run_file_literals(p.read_text())]
    assert not found, "name run files through stabkit.store.rundir.RunDir:\n" + "\n".join(found)
