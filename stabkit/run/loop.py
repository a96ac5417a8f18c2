"""One round loop for everything that steps a paired engine: ``RunState`` and ``run_rounds(run, callbacks)``.

A run (a paired run, the audit's trials, the flatness replay, a Flower app) says what one round is
(``advance(t)``); everything done around the rounds -- flushing the logs, checkpoints, saved models,
sharpness, privacy accounting, progress, TensorBoard -- is a callback with the hooks it needs (after
Lightning's fit loop and its ``Callback``):

* ``on_run_start(run, state)``: before the first round of this session (``state.round`` rounds are done: 0 for a
  fresh run, the checkpoint's round for a resumed one);
* ``on_round_end(run, state)``: after each finished round ``state.round``, in order;
* ``on_progress(run, state)``: then, once every ``on_round_end`` has run (the state is whole: a Ctrl-C from here
  keeps round ``state.round``): progress displays;
* ``on_interrupt(run, state)``: after a Ctrl-C (``state.consistent``: it came between rounds, so the state is
  whole and may be saved);
* ``on_error(run, state)``: before an error that is not the run's (a refused configuration) propagates;
* ``on_run_end(run, state)``: after the last round, a divergence, an interruption or a failure.

A callback defines only the hooks it uses (they are looked up by name), so rooms below ``stabkit.run`` (privacy,
flatness, store) provide callbacks without importing this module. A diverging round stops the loop with status
``diverged`` (the round is logged, not counted); a plug-in's failure (``PluginFailed``) or a callback's failure
ends it with status ``failed`` and the rounds before kept; a Ctrl-C with status ``interrupted``.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from stabkit.errors import ConfigError, PluginFailed
from stabkit.plugins import describe_error

# The time accounts of a run (seconds), in the order summary.json reports them.
TIMERS = ("train_s", "eval_s", "checkpoint_s", "sharpness_s", "wall_s", "constants_s")


class Timers:
    """A run's time accounts, with one owner: whatever spends time on the run's behalf adds it through
    :meth:`timed`; ``wall_s`` runs while the loop does (:meth:`running`), so a checkpoint taken mid-run
    records the wall time so far."""

    def __init__(self, saved: Optional[dict] = None):
        self._s = dict.fromkeys(TIMERS, 0.0)
        self._since: Optional[float] = None
        self.load(saved or {})

    def load(self, saved: dict) -> None:
        """Continue the accounts ``saved`` (a checkpoint's)."""
        self._s.update(saved)

    @contextmanager
    def timed(self, name: str):
        """Add the time the block takes to ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._s[name] += time.perf_counter() - start

    @contextmanager
    def running(self):
        """The wall clock of a session of rounds."""
        self._since = time.perf_counter()
        try:
            yield
        finally:
            self._s["wall_s"] += time.perf_counter() - self._since
            self._since = None

    def as_dict(self) -> dict:
        """The accounts now (a running wall clock included)."""
        out = dict(self._s)
        if self._since is not None:
            out["wall_s"] += time.perf_counter() - self._since
        return out

    def __getitem__(self, name: str) -> float:
        return self.as_dict()[name]


@dataclass
class RunState:
    """Where a run stands: ``round`` rounds done of ``rounds``, the last round's ``record``, the status and
    why it stopped early, the time accounts, and the parameter ``snapshots`` kept for the constants."""

    rounds: int
    round: int = 0
    record: Any = None
    status: str = "running"  # then completed, diverged, interrupted or failed
    diverged: Optional[str] = None  # why the run diverged (non-finite or above the threshold)
    diverged_round: Optional[int] = None
    interrupted: Optional[str] = None  # where a Ctrl-C stopped it
    failed: Optional[str] = None  # why a plug-in's hook or a callback failed (the rounds before are kept)
    consistent: bool = True  # between rounds: the state is whole and may be saved
    first: int = 1  # the first round of this session (a resumed run starts after its checkpoint)
    timers: Timers = field(default_factory=Timers)
    snapshots: dict = field(default_factory=dict)


def tell(callbacks: Iterable, hook: str, run, state: RunState, *args) -> None:
    """Call ``hook`` of every callback that has it, in order."""
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        if fn is not None:
            fn(run, state, *args)


def _checked(callbacks, hook: str, run, state: RunState) -> None:
    """:func:`tell`, a callback's failure turned into the run's (``PluginFailed``, one line naming it); a
    refused configuration, a file-system error and a Ctrl-C pass as they are."""
    for cb in callbacks:
        fn = getattr(cb, hook, None)
        try:
            if fn is not None:
                fn(run, state)
        except (ConfigError, OSError):
            raise
        except Exception as e:
            raise PluginFailed(f"{type(cb).__name__}.{hook} at round {state.round} raised {describe_error(e)}") \
                from e


def run_rounds(run, callbacks: Iterable = ()) -> RunState:
    """Run the rounds of ``run`` (its ``state`` and ``advance(t)``, which runs round t and returns why the run
    diverged or None; ``start()`` if it has one, called first) from ``run.state.round + 1`` to
    ``run.state.rounds``, telling ``callbacks``; return the state with its final status."""
    callbacks, state = list(callbacks), run.state
    state.status, state.first = "running", state.round + 1
    with state.timers.running():
        try:
            getattr(run, "start", lambda: None)()
            _checked(callbacks, "on_run_start", run, state)
            while state.round < state.rounds:
                state.consistent, t = False, state.round + 1
                why = run.advance(t)
                if why is not None:
                    state.status, state.diverged, state.diverged_round = "diverged", why, t
                    break
                state.round = t
                _checked(callbacks, "on_round_end", run, state)
                state.consistent = True  # from here to the next round's start the state is whole
                _checked(callbacks, "on_progress", run, state)
            else:
                state.status = "completed"
        except PluginFailed as e:  # a plug-in's hook or a callback failed: the rounds before are kept
            state.status, state.failed = "failed", str(e)
        except KeyboardInterrupt:
            state.status, state.interrupted = "interrupted", f"round {state.round + 1}"
            tell(callbacks, "on_interrupt", run, state)
        except ConfigError:  # refused mid-run (a Flower strategy raised): the callbacks keep what was logged
            tell(callbacks, "on_error", run, state)
            raise
    tell(callbacks, "on_run_end", run, state)
    return state


class EngineRounds:
    """A run of bare paired engines (nothing logged or written): round t steps each of ``engines`` (their round
    t - 1), keeping the clients' final local models at the rounds ``keep_clients``; the last engine's record is
    ``state.record``. ``done``: rounds already behind the engines (the next is ``done + 1``). The audit's
    trials, the estimate's probes and the flatness replay run through :func:`run_rounds` as one."""

    def __init__(self, engines: Iterable, rounds: int, keep_clients: Iterable = (), done: int = 0):
        self.engines, self.keep = list(engines), set(keep_clients)
        self.state = RunState(done + rounds, round=done)

    def advance(self, t: int) -> None:
        for eng in self.engines:
            self.state.record = eng.step(t - 1, keep_clients=t in self.keep)


__all__ = ["TIMERS", "EngineRounds", "RunState", "Timers", "run_rounds", "tell"]
