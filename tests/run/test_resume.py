"""Checkpoint and resume: a killed, interrupted or finished run continues to byte-identical metrics; an
existing run directory is never silently overwritten."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from stabkit import RunConfig, TaskOptions, load_run, run_pair
from stabkit.errors import ConfigError
from stabkit.run.experiment import resume_config, resume_pair
from tests.helpers import cli

QUAD = ["--task", "quadratic", "--pairs", "2", "--clients", "8", "--samples-per-client", "20",
        "--no-constants", "--quiet"]


def _cfg(**kw):
    base = dict(algo="scaffold", task="quadratic", pairs=2, rounds=30, local_steps=3, checkpoint_every=3,
                eval_every=4, eval_fraction=0.5, local_rounds=(0, 8), constants=False,
                task_options=TaskOptions(clients=8, samples_per_client=20))
    return RunConfig(**{**base, **kw})


def _same_files(a, b):
    for f in ("metrics.csv", "local.csv"):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f


def test_resuming_a_finished_run_to_more_rounds_matches_an_uninterrupted_run(tmp_path):
    # scaffold carries per-client and server state; eval every 4 rounds on half the data, all data at the
    # last round, so round 10 (the short run's last) is re-logged on the subset when the run continues;
    # the part-loss columns first appear at round 4, after the first checkpoint (round 3).
    run_pair(_cfg(), out=tmp_path / "full")
    short = run_pair(_cfg(rounds=10), out=tmp_path / "short")
    assert short["status"] == "completed" and short["rounds_done"] == 10
    summary = resume_pair(tmp_path / "short", rounds=30)
    assert summary["rounds_done"] == 30 and summary["final_round"] == 30
    _same_files(tmp_path / "full", tmp_path / "short")
    assert json.loads((tmp_path / "short" / "config.json").read_text())["rounds"] == 30
    with pytest.raises(ConfigError, match="rounds=20.*at least 30"):
        resume_pair(tmp_path / "short", rounds=20)


def test_resume_after_a_lost_tail_truncates_to_the_checkpoint(tmp_path):
    """A run killed after its last checkpoint logged rows the checkpoint does not cover (and maybe half a
    row group): resume drops them and recomputes the same rows."""
    run_pair(_cfg(), out=tmp_path / "full")
    out = tmp_path / "cut"
    run_pair(_cfg(rounds=12, checkpoint_every=5), out=out)  # rows up to round 12, checkpoint at round 12
    run_pair(_cfg(rounds=10, checkpoint_every=5), out=tmp_path / "ten")
    # the state after round 10 (the same in both runs): as if the 12-round run was killed before round 15
    os.replace(tmp_path / "ten" / "checkpoint.pt", out / "checkpoint.pt")
    (out / "summary.json").unlink()  # a run killed while running has not written its summary
    with open(out / "metrics.csv", "a") as f:
        f.write("13,0,0.5")  # half a row group of a killed flush
    assert load_run(out)["round"].max() == 12  # readers never see the partial group
    resume_pair(out, rounds=30)
    _same_files(tmp_path / "full", out)


def test_sigkilled_run_resumes_to_a_byte_identical_result(tmp_path, capsys):
    args = ["pair", *QUAD, "--rounds", "200", "--checkpoint-every", "10"]
    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, "-m", "stabkit_cli", *args, "--out", str(killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not (killed / "checkpoint.pt").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    rounds_at_kill = load_run(killed)["round"].max()
    assert rounds_at_kill < 200
    code, out, err = cli(["pair", "--resume", str(killed), "--quiet"], capsys)
    assert code == 0, err
    code, _, err = cli([*args, "--out", str(tmp_path / "whole")], capsys)
    assert code == 0, err
    _same_files(tmp_path / "whole", killed)
    s = json.loads((killed / "summary.json").read_text())
    assert s["status"] == "completed" and s["rounds_done"] == 200


def test_existing_run_directory_is_refused_with_one_line_and_overwrite_replaces_it(tmp_path, capsys):
    out = tmp_path / "r"
    args = ["pair", *QUAD, "--rounds", "3", "--out", str(out)]
    assert cli(args, capsys)[0] == 0
    before = (out / "metrics.csv").read_bytes()
    code, _, err = cli(args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "already holds a run (completed after 3 rounds, with a checkpoint)" in err
    assert f"--resume {out}" in err and "--overwrite" in err
    assert (out / "metrics.csv").read_bytes() == before
    code, _, err = cli(["pair", *QUAD, "--rounds", "4", "--out", str(out), "--overwrite"], capsys)
    assert code == 0, err
    assert load_run(out)["round"].max() == 4


def test_resume_accepts_only_rounds_and_output_options(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli(["pair", *QUAD, "--rounds", "3", "--out", str(out)], capsys)[0] == 0
    code, _, err = cli(["pair", "--resume", str(out), "--lr", "0.5"], capsys)
    assert code == 2 and "--lr with --resume" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli(["pair", "--resume", str(tmp_path / "nothing")], capsys)
    assert code == 2 and "config.json" in err
    code, stdout, err = cli(["pair", "--resume", str(out), "--rounds", "5", "--quiet"], capsys)
    assert code == 0, err
    assert load_run(out)["round"].max() == 5 and "(5 rounds" in stdout
    no_ck = tmp_path / "no_ck"
    assert cli(["pair", *QUAD, "--rounds", "3", "--checkpoint-every", "0", "--out", str(no_ck)], capsys)[0] == 0
    code, _, err = cli(["pair", "--resume", str(no_ck)], capsys)
    assert code == 2 and "no checkpoint.pt" in err


def test_interrupted_run_checkpoints_its_last_round_and_resumes(tmp_path):
    from stabkit.run.experiment import PairedRun

    def stop_at_7(t, stats):
        assert 0 <= stats["eval_share"] < 1
        if t == 7:
            raise KeyboardInterrupt

    run_pair(_cfg(), out=tmp_path / "full")
    summary = PairedRun(_cfg(checkpoint_every=100)).run(tmp_path / "cut", progress=stop_at_7)
    assert summary["status"] == "interrupted" and summary["rounds_done"] == 7
    assert load_run(tmp_path / "cut")["round"].max() == 7
    resume_pair(tmp_path / "cut")
    _same_files(tmp_path / "full", tmp_path / "cut")


def test_a_billion_round_horizon_starts_and_resumes_without_walking_its_rounds(tmp_path):
    """Nothing at start is O(rounds) (save-round sets, schedules): 10**18 rounds start, checkpoint, resume and
    extend at once; a walk over the rounds would hit the alarm (0.8 s per million rounds)."""
    import signal

    from stabkit.run.experiment import PairedRun

    def too_slow(signum, frame):
        raise AssertionError("start-up walked the rounds")

    def stop_after(n):
        def progress(t, stats):
            if t == n:
                raise KeyboardInterrupt
        return progress

    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(120)
    try:
        horizon = 10 ** 18
        summary = PairedRun(_cfg(rounds=horizon, save_models="every:7")).run(tmp_path / "r", progress=stop_after(2))
        assert summary["status"] == "interrupted" and summary["rounds_done"] == 2
        run = PairedRun(resume_config(tmp_path / "r", rounds=2 * horizon))
        summary = run.resume(tmp_path / "r", progress=stop_after(3))
        assert summary["rounds_done"] == 3 and load_run(tmp_path / "r")["round"].max() == 3
        assert json.loads((tmp_path / "r" / "config.json").read_text())["rounds"] == 2 * horizon
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_resumed_run_keeps_the_sharpness_measured_before_its_checkpoint(tmp_path):
    """sharpness.csv of an interrupted and resumed run holds every sharpness round, as an uninterrupted run's."""
    from stabkit.run.experiment import PairedRun

    def stop_at_5(t, stats):
        if t == 5:
            raise KeyboardInterrupt

    cfg = _cfg(rounds=8, local_rounds=(0, 6), sharpness_rounds=(0, 4, 8))
    run_pair(cfg, out=tmp_path / "full")
    PairedRun(cfg.replace(checkpoint_every=100)).run(tmp_path / "cut", progress=stop_at_5)
    resume_pair(tmp_path / "cut")
    full = (tmp_path / "full" / "sharpness.csv").read_text()
    assert sorted({line.split(",")[0] for line in full.splitlines()[1:]}) == ["0", "4", "8"]
    assert (tmp_path / "cut" / "sharpness.csv").read_text() == full


def test_between_checkpoints_logs_flush_every_ten_rounds_at_most_once_per_interval(tmp_path, monkeypatch):
    """Without a checkpoint due, rows go to disk every FLUSH_EVERY rounds once FLUSH_SECONDS have passed since
    the last flush (a fast run flushes about once a second), and always at the end; the logs are the same."""
    import stabkit.run.callbacks as callbacks
    from stabkit.run.writer import RunWriter
    seen, flush = [], RunWriter.flush
    monkeypatch.setattr(RunWriter, "flush", lambda self, rows, local: (
        seen.append(int(rows[-1]["round"][0]) if rows else None), flush(self, rows, local)))
    logs = {}
    for seconds, flushes in ((0.0, [10, 20, 30, 35]), (1e9, [35])):
        seen.clear()
        monkeypatch.setattr(callbacks, "FLUSH_SECONDS", seconds)
        run_pair(_cfg(rounds=35, checkpoint_every=0), out=tmp_path / str(seconds))
        assert seen == flushes
        logs[seconds] = [(tmp_path / str(seconds) / name).read_bytes() for name in ("metrics.csv", "local.csv")]
    assert logs[0.0] == logs[1e9] and load_run(tmp_path / "0.0")["round"].max() == 35


def test_a_resume_removes_the_figures_drawn_from_fewer_rounds_and_says_so(tmp_path, capsys):
    run_pair(_cfg(rounds=6, local_rounds=(0,)), out=tmp_path / "r")
    figures = tmp_path / "r" / "figures"
    figures.mkdir()
    (figures / "discrepancy.png").write_bytes(b"drawn from 6 rounds")
    assert resume_pair(tmp_path / "r", rounds=9)["rounds_done"] == 9
    assert not figures.exists()
    assert f"removed {figures}: drawn from the run's first 6 rounds" in capsys.readouterr().err


def test_progress_names_the_constants_stage_after_the_rounds(tmp_path):
    seen = []
    run_pair(_cfg(rounds=4, constants=True, local_rounds=(0,)), out=tmp_path / "r", progress=lambda t, stats: seen.append((t, stats)))
    assert [t for t, s in seen if "stage" not in s] == [1, 2, 3, 4]
    assert seen[-1] == (4, {"stage": "constants"})


@pytest.mark.parametrize("perturb", ["remove-client", "remove-sample"])
def test_removal_runs_resume_to_the_uninterrupted_bytes_with_their_stored_updates(tmp_path, perturb):
    cfg = _cfg(perturb=perturb, clients_per_round=3, store_updates=True, rounds=12, local_rounds=(0,))
    run_pair(cfg, out=tmp_path / "full")
    run_pair(cfg.replace(rounds=5, local_rounds=(0,)), out=tmp_path / "short")
    resume_pair(tmp_path / "short", rounds=12)
    _same_files(tmp_path / "full", tmp_path / "short")
    for t in (1, 5, 6, 12):
        path = f"updates/round_{t}.pt"
        assert torch.equal(torch.load(tmp_path / "full" / path)["update"], torch.load(tmp_path / "short" / path)["update"])
