"""``--estimate``: the projection's arithmetic, a real estimate that writes nothing, fixture data for presets."""
import time

import pytest

import stabkit.run.estimate as estimate
from cli.main import main
from stabkit import RunConfig, TaskOptions
from stabkit.errors import ConfigError
from stabkit.run.estimate import Estimate, estimate_run, with_fixture_data
from stabkit.run.experiment import PairedRun
from tests.helpers import cli


def test_projection_counts_every_round_and_the_evaluation_schedule():
    est = Estimate(round_s=2.0, probe="2 clients x 2 local steps timed", eval_s=1.0, full_eval_s=3.0, evaluations=2, rounds=10, pairs=8,
                   peak_bytes=2 ** 30, device="cpu", threads=2, schedule="every 5 rounds on 10% of the data")
    assert est.total_s == 2.0 * 10 + 1.0 * 2 + 3.0
    assert est.eval_share == pytest.approx(5.0 / 25.0)
    line = est.describe()
    assert "2 s/round" in line and "20% of the run" in line and "1.00 GiB" in line and "25 s" in line


def test_estimate_of_a_real_run_follows_its_schedule():
    cfg = RunConfig(task="synthetic", pairs=2, rounds=10, eval_every=5, eval_fraction=0.5, constants=False,
                    task_options=TaskOptions(clients=6, samples_per_client=20))
    run = PairedRun(cfg)
    est = estimate_run(run, rounds=2)
    assert est.evaluations == 2 and est.rounds == 10 and est.pairs == 2  # rounds 0 and 5; round 10 on all data
    assert est.round_s > 0 and est.eval_s > 0 and est.full_eval_s > 0 and est.peak_bytes > 2 ** 20
    assert run.engine.x.shape[:2] == (2, 2)


def test_pair_estimate_writes_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    main(["pair", "--task", "synthetic", "--rounds", "20", "--pairs", "2", "--clients", "6",
          "--samples-per-client", "20", "--out", str(out), "--estimate"])
    text = capsys.readouterr().out
    assert "s/round" in text and "projected 20 rounds" in text and "nothing written" in text
    assert not out.exists()


def test_preset_without_data_files_is_timed_on_fixture_files_of_the_real_size(tmp_path, monkeypatch):
    monkeypatch.setitem(estimate.REAL_SIZES, "cifar10", (120, 30))  # the real size, shrunk for the test
    (tmp_path / "empty").mkdir()  # a folder without the data set's files
    cfg = RunConfig.from_dict({"task": "cifar10", "model": "cnn", "clients": 4, "heldout_clients": 2,
                               "data_dir": str(tmp_path / "empty")})
    cfg2, task, note = with_fixture_data(cfg, tmp_path / "fixture")
    assert "not found" in note and "120 + 30" in note
    assert sum(len(y) for y in task.train_y) + sum(len(y) for y in task.val_y) + len(task.test_y) == 150
    assert (tmp_path / "fixture").is_dir() and cfg2.task_options.data_dir == str(tmp_path / "fixture")
    with pytest.raises(ConfigError, match="npz"):  # a task with no fixture writer keeps its one-line error
        with_fixture_data(RunConfig.from_dict({"task": "npz", "model": "logistic"}), tmp_path / "x")


def test_the_leaf_and_tiny_imagenet_presets_get_fixture_files_too(tmp_path, monkeypatch):
    """fedsagd-shakespeare and fedswa-tinyimagenet can be estimated without their data (shrunk here)."""
    monkeypatch.setattr(estimate, "LEAF_SAMPLES", (30, 6))
    cfg = RunConfig.from_dict({"task": "shakespeare", "model": "char_lstm", "clients": 4, "heldout_clients": 2})
    _, task, note = with_fixture_data(cfg, tmp_path / "leaf")
    assert "6 roles x 30 + 6 random sequences" in note
    assert sum(len(y) for y in task.train_y) + sum(len(y) for y in task.val_y) == 6 * 30  # every role's sequences
    assert len(task.test_y) == 4 * 6  # the training roles' test sequences
    monkeypatch.setattr(estimate, "TINYIMAGENET", (4, 10, 8))
    cfg = RunConfig.from_dict({"task": "tinyimagenet", "model": "resnet18_gn", "clients": 2, "heldout_clients": 2,
                               "partition": "iid"})
    _, task, note = with_fixture_data(cfg, tmp_path / "tiny")
    assert "40 + 8 random JPEGs" in note
    assert sum(len(y) for y in task.train_y) + sum(len(y) for y in task.val_y) + len(task.test_y) == 48


@pytest.mark.parametrize("rounds", [10 ** 12, 10 ** 18])
def test_the_estimate_of_a_horizon_of_any_length_answers_at_once(capsys, rounds):
    start = time.perf_counter()
    code, text, _ = cli(["pair", "--task", "quadratic", "--pairs", "1", "--clients", "4", "--heldout-clients", "2",
                         "--samples-per-client", "20", "--rounds", str(rounds), "--estimate"], capsys)
    took = time.perf_counter() - start
    assert code == 0 and f"projected {rounds} rounds" in text and " years on this machine" in text, text
    assert took < 20, f"{took:.1f} s"


def test_evaluations_are_counted_in_closed_form():
    cfg = RunConfig(task="quadratic", pairs=1, rounds=10 ** 18, eval_every=7, eval_fraction=1.0, constants=False,
                    task_options=TaskOptions(clients=4, heldout_clients=2, samples_per_client=20))
    est = estimate_run(PairedRun(cfg), rounds=1)
    assert est.evaluations == (10 ** 18 - 1) // 7 + 1  # rounds 0, 7, 14, ... below T
    small = estimate_run(PairedRun(cfg.replace(rounds=15)), rounds=1)
    assert small.evaluations == 3  # rounds 0, 7, 14; round 15 is the all-data evaluation


def test_a_round_is_projected_from_probes_of_its_clients_and_local_steps(monkeypatch):
    """Probes of 1 and 2 local steps on 2 clients, each costing 1 s per client-step plus 0.5 s per round, give
    a round of 10 clients x 50 steps: 0.5 + 50 x 10 x 1 s."""
    cfg = RunConfig(task="quadratic", pairs=1, rounds=3, local_steps=50, clients_per_round=10, constants=False,
                    task_options=TaskOptions(clients=12, heldout_clients=2, samples_per_client=20))
    run = PairedRun(cfg)
    seen = []

    def fake_time(fn, device):
        eng = run.engine
        seen.append((eng.s, eng.cfg.local_steps))
        return 0.5 + eng.s * eng.cfg.local_steps * 1.0

    monkeypatch.setattr(estimate, "_timed", fake_time)
    round_s, probe = estimate.round_seconds(run, repeats=1)
    assert seen == [(2, 1), (2, 1), (2, 2)] and probe == "2 clients x 2 local steps timed"
    assert round_s == pytest.approx(0.5 + 50 * 10 * 1.0)
    assert run.engine.s == 10 and run.engine.cfg.local_steps == 50  # the run is put back


@pytest.mark.parametrize("make,needle", [
    (lambda p: p, "no such directory"),
    (lambda p: (p.write_text("x"), p)[1], "a file, not a directory"),
])
def test_a_data_dir_that_is_not_a_directory_is_refused_before_any_timing(tmp_path, capsys, make, needle):
    bad = make(tmp_path / "cifar")
    for args in (["pair", "--task", "cifar10", "--estimate"], ["presets", "fedsagd-cifar10", "--estimate"]):
        start = time.perf_counter()
        code, _, err = cli(args + ["--data-dir", str(bad)], capsys)
        assert code == 2 and err.count("\n") == 1 and f"invalid data_dir={str(bad)!r}: {needle}" in err, err
        assert time.perf_counter() - start < 10
