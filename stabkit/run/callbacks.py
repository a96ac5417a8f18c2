"""The round loop's callbacks (``stabkit.run.loop``) that keep a paired run's directory: the logs flushed, the
parameter snapshots the constants are estimated at, the saved models and client updates, checkpoints, and the
caller's progress. Sharpness (``stabkit.flatness.runlog``), privacy (``stabkit.privacy.runfile``) and
TensorBoard (``stabkit.store.tensorboard``) have theirs in their own rooms.

A Ctrl-C between rounds keeps a consistent checkpoint; a killed run loses at most the rows logged since the
last flush (a checkpoint always flushes first).
"""
from __future__ import annotations

import time
from typing import Callable, Optional

from stabkit.run.writer import RunWriter

# Between checkpoints the logged rows are appended to the logs (and fsynced) every FLUSH_EVERY rounds once
# FLUSH_SECONDS have passed since the last flush: a round of W1 (~9 ms) would otherwise spend ~0.9 ms on
# flushes of 10 rounds' rows; a killed run loses at most that much of its log (a checkpoint flushes always).
FLUSH_EVERY = 10
FLUSH_SECONDS = 1.0


class Flush:
    """Appends the rows the run logged to ``metrics.csv`` and ``local.csv``: every ``FLUSH_EVERY`` rounds once
    ``FLUSH_SECONDS`` have passed, when asked (a checkpoint), and when the run ends or an error stops it."""

    def __init__(self, writer: RunWriter):
        self.writer = writer
        self._flushed = time.perf_counter()  # when the logs were last flushed
        self._round: Optional[int] = None  # the round after which they were

    def flush(self, run, state) -> None:
        self.writer.flush(*run.log.take())
        self._flushed, self._round = time.perf_counter(), state.round

    def on_round_end(self, run, state) -> None:
        t = state.round
        if t != self._round and t % FLUSH_EVERY == 0 and time.perf_counter() - self._flushed >= FLUSH_SECONDS:
            self.flush(run, state)

    on_run_end = on_error = flush


class Snapshots:
    """Keeps trajectory A's parameters of pair 0 at rounds 0, T/2 and T in ``state.snapshots``: the points the
    constants are estimated at (``stabkit.run.constants``), saved with every checkpoint."""

    def on_run_start(self, run, state) -> None:
        if state.round == 0:
            self.on_round_end(run, state)

    def on_round_end(self, run, state) -> None:
        if state.round in (0, state.rounds // 2, state.rounds):
            state.snapshots[state.round] = run.engine.x[0, 0].clone()


class SavedModels:
    """``--save-models``: the global models after the rounds it asks for (round 0 when a run starts);
    ``--store-updates``: each round's client updates of trajectory A. Time goes to ``checkpoint_s``."""

    def __init__(self, writer: RunWriter):
        self.writer = writer

    def on_run_start(self, run, state) -> None:
        if state.round == 0:
            self._save(run, state)

    def on_round_end(self, run, state) -> None:
        self._save(run, state)
        if run.updates is not None:
            with state.timers.timed("checkpoint_s"):
                self.writer.save_updates(state.round, *run.updates)

    def _save(self, run, state) -> None:
        with state.timers.timed("checkpoint_s"):
            self.writer.save_models(state.round, run.engine.x, run.model.names, run.model.shapes)


class Checkpoints:
    """Every ``checkpoint_every`` rounds and after the last (and after a Ctrl-C between rounds of this
    session): the logs flushed and the run's whole state saved (``RunWriter.checkpoint``)."""

    def __init__(self, writer: RunWriter, flush: Flush, every: int):
        self.writer, self.flush, self.every = writer, flush, every

    def on_round_end(self, run, state) -> None:
        if self.every and (state.round % self.every == 0 or state.round == state.rounds):
            self.save(run, state)

    def on_interrupt(self, run, state) -> None:
        if state.consistent and self.every and state.round >= state.first:
            self.save(run, state)

    def save(self, run, state) -> None:
        self.flush.flush(run, state)
        eng, host = run.engine, run.algo.host_state()
        saved = {"x": eng.x, "server": eng.server, "client_state": eng.client_state,
                 **({"host": host} if host is not None else {})}  # e.g. Flower strategies
        with state.timers.timed("checkpoint_s"):
            self.writer.checkpoint(state.round, saved, state.record, state.snapshots, state.timers.as_dict())


class Progress:
    """The caller's ``progress(t, stats)`` after every round (``stats["eval_share"]``: the share of the run's
    time spent evaluating) and at each phase after the rounds (``stats["stage"]``)."""

    def __init__(self, progress: Callable):
        self.progress = progress

    def on_progress(self, run, state) -> None:
        times = state.timers.as_dict()
        self.progress(state.round, {"eval_share": times["eval_s"] / max(times["wall_s"], 1e-9)})

    def on_stage(self, run, state, stage: str) -> None:
        self.progress(state.round, {"stage": stage})


__all__ = ["FLUSH_EVERY", "FLUSH_SECONDS", "Checkpoints", "Flush", "Progress", "SavedModels", "Snapshots"]
