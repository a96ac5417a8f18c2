"""The one round loop (stabkit.run.loop): callbacks see every round in order, the time accounts have one owner,
a callback's failure ends the run as a plug-in's failure does, and bare engines step through the same loop."""
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.engine.determinism import deterministic
from stabkit.run import loop
from stabkit.run.experiment import PairedRun, resume_pair
from stabkit.run.loop import TIMERS, EngineRounds, RunState, Timers, run_rounds

ROOT = Path(__file__).resolve().parents[2]


def _cfg(**kw):
    base = dict(algo="scaffold", task="quadratic", pairs=2, rounds=8, local_steps=2, checkpoint_every=3,
                eval_every=2, local_rounds=(), constants=False, task_options=TaskOptions(clients=6, samples_per_client=20))
    return RunConfig(**{**base, **kw})


class Seen:
    """Records every hook the loop calls, with the round and status it was called at."""

    def __init__(self):
        self.calls = []

    def on_run_start(self, run, state):
        self.calls.append(("start", state.round))

    def on_round_end(self, run, state):
        self.calls.append(("round", state.round))

    def on_run_end(self, run, state):
        self.calls.append(("end", state.round, state.status))


def test_a_callback_sees_every_round_in_order_and_a_resume_continues_the_count(tmp_path):
    seen = Seen()
    summary = PairedRun(_cfg(rounds=5)).run(tmp_path / "r", callbacks=[seen])
    assert summary["status"] == "completed"
    assert seen.calls == [("start", 0), *(("round", t) for t in range(1, 6)), ("end", 5, "completed")]
    seen.calls.clear()
    resume_pair(tmp_path / "r", rounds=8)  # its own callbacks only
    resumed = PairedRun(_cfg(rounds=11))
    resumed.resume(tmp_path / "r", callbacks=[seen])
    assert seen.calls == [("start", 8), ("round", 9), ("round", 10), ("round", 11), ("end", 11, "completed")]


def test_a_diverging_round_is_not_told_and_ends_the_run_diverged(tmp_path):
    seen = Seen()
    summary = PairedRun(_cfg(lr=1e9, algo="fedavg")).run(tmp_path / "r", callbacks=[seen])
    assert summary["status"] == "diverged"
    t = summary["diverged_round"]
    assert seen.calls == [("start", 0), *(("round", r) for r in range(1, t)), ("end", t - 1, "diverged")]


class Boom:
    def on_round_end(self, run, state):
        if state.round == 3:
            raise RuntimeError("disk of dreams")


def test_a_callbacks_failure_ends_the_run_failed_with_the_rounds_before_kept(tmp_path):
    """As a plug-in hook failing mid-run (status failed, a one-line reason, the rows logged so far kept, no
    constants), naming the callback and the round."""
    summary = PairedRun(_cfg(constants=True)).run(tmp_path / "r", callbacks=[Boom()])
    assert (summary["status"], summary["rounds_done"]) == ("failed", 3)
    assert summary["failed_reason"] == "Boom.on_round_end at round 3 raised RuntimeError: disk of dreams"
    assert summary["constants"] == "skipped: the run failed"
    assert pd.read_csv(tmp_path / "r" / "metrics.csv")["round"].max() == 3
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["status"] == "failed"


def test_timers_add_what_a_block_takes_and_the_wall_clock_only_while_running(monkeypatch):
    clock = [100.0]  # a clock the test moves: the accounts are exact sums of what it moved
    monkeypatch.setattr(loop.time, "perf_counter", lambda: clock[0])
    timers = Timers({"eval_s": 1.0})  # continued from a checkpoint's accounts
    with timers.timed("eval_s"):
        clock[0] += 0.25
    assert list(timers.as_dict()) == list(TIMERS) and timers["eval_s"] == 1.25 and timers["wall_s"] == 0.0
    with timers.running():
        clock[0] += 2.0
        assert timers["wall_s"] == 2.0  # a checkpoint taken mid-run records the wall time so far
        clock[0] += 1.0
    clock[0] += 5.0  # after the session: not counted
    assert timers["wall_s"] == 3.0 and timers["eval_s"] == 1.25


def test_the_time_accounts_have_one_owner():
    """Only stabkit.run.loop writes a time account; every other module adds time through Timers.timed."""
    pattern = re.compile(r"""\[["'](train|eval|checkpoint|sharpness|wall|constants)_s["']\]\s*\+?=(?!=)""")
    writers = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "stabkit").rglob("*.py")
                     if pattern.search(p.read_text()))
    assert writers == ["stabkit/run/loop.py"]


def test_the_summary_reports_the_run_states_time_accounts(tmp_path):
    run = PairedRun(_cfg(rounds=4))
    summary = run.run(tmp_path / "r")
    times = run.state.timers.as_dict()
    assert {k: summary["time"][k] for k in TIMERS} == times
    assert times["train_s"] > 0 and times["eval_s"] > 0 and times["wall_s"] >= times["train_s"] + times["eval_s"]


def test_bare_engines_through_the_loop_step_as_the_run_does():
    """EngineRounds (the audit, the estimate, the replay) gives the paired run's own models, bit for bit."""
    cfg = _cfg(rounds=4, checkpoint_every=0)
    run, bare = PairedRun(cfg), PairedRun(cfg).engine
    for _ in range(4):
        run.step()
    with deterministic():
        state = run_rounds(EngineRounds((bare,), 4, keep_clients=(4,)))
    assert torch.equal(bare.x, run.engine.x) and state.status == "completed" and state.round == 4
    assert state.record.clients is not None


def test_a_ctrl_c_mid_round_keeps_no_checkpoint_of_it():
    class Stepper:
        state = RunState(5)

        def advance(self, t):
            if t == 3:
                raise KeyboardInterrupt

    saved = []

    class Keep:
        def on_interrupt(self, run, state):
            saved.append((state.round, state.consistent))

    state = run_rounds(Stepper(), [Keep()])
    assert (state.status, state.interrupted, state.round) == ("interrupted", "round 3", 2)
    assert saved == [(2, False)]


@pytest.mark.parametrize("hook", ["on_run_start", "on_round_end"])
def test_a_refused_configuration_in_a_callback_is_not_turned_into_a_failed_run(hook):
    from stabkit.errors import ConfigError

    class Refuses:
        pass

    setattr(Refuses, hook, lambda self, run, state: (_ for _ in ()).throw(ConfigError("invalid x=1: no")))

    class Stepper:
        state = RunState(2)

        def advance(self, t):
            return None

    with pytest.raises(ConfigError, match="invalid x=1"):
        run_rounds(Stepper(), [Refuses()])
