"""``RunRecorder``: a built :class:`~stabkit.run.experiment.PairedRun` run through the round loop
(``stabkit.run.loop``) into its run directory.

It writes ``config.json`` (the configuration with the run's facts), sets a resumed run back to its checkpoint,
runs the rounds with the directory's callbacks (``stabkit.run.callbacks``: flushes, snapshots, saved models,
checkpoints, progress; sharpness and a DP run's ``privacy.json`` from their rooms; last, :class:`Summary`:
the constants estimated, ``constants.json`` and ``summary.json`` written) and then the caller's (e.g.
TensorBoard, which reads the finished logs). A Ctrl-C during the constants'
estimation keeps the complete rounds and a summary saying the constants were skipped.
"""
from __future__ import annotations

import platform
import shutil
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from stabkit import __version__
from stabkit.algorithms import resolve_hp
from stabkit.engine import alloc
from stabkit.engine.determinism import deterministic
from stabkit.engine.kernels import kernel_facts
from stabkit.engine.paired import RoundRecord
from stabkit.engine.threads import threads_for
from stabkit.privacy.runfile import PrivacyFile
from stabkit.run.callbacks import Checkpoints, Flush, Progress, SavedModels, Snapshots
from stabkit.run.constants import run_constants
from stabkit.run.loop import run_rounds, tell
from stabkit.run.roundlog import OVERFLOW
from stabkit.run.writer import RunWriter
from stabkit.store.rundir import RunDir
from stabkit.store.runstore import load_run


class RunRecorder:
    """Writes the run ``run`` (a ``PairedRun``) into the directory ``out``; ``progress(t, stats)`` and
    ``callbacks`` (more hooks of the round loop) as for ``PairedRun.run``."""

    def __init__(self, run, out: Path, progress: Optional[Callable] = None, callbacks: Sequence = ()):
        self.run, self.out = run, Path(out)
        self.writer = RunWriter(self.out, run.cfg)
        flush = Flush(self.writer)
        sharpness = []
        if run.cfg.sharpness_rounds:  # imported here: the flatness measures bring pandas
            from stabkit.flatness.runlog import SharpnessRounds
            sharpness = [SharpnessRounds(run, self.out)]
        told = [Progress(progress)] if progress is not None else []
        self.summary = Summary(self.writer, told)
        self.callbacks = [*sharpness, Snapshots(), SavedModels(self.writer),
                          Checkpoints(self.writer, flush, run.cfg.checkpoint_every), flush,
                          *PrivacyFile.of(self.out, run.privacy, run.cfg.dp_noise), *told, self.summary, *callbacks]

    def start(self, label: Optional[str]) -> dict:
        """Log round 0 and run every round; return the summary."""
        self._open(label)
        with deterministic():  # every logged number, round 0's included
            return self._rounds()

    def resume(self, ck: dict) -> dict:
        """Continue from the checked checkpoint ``ck`` up to the run's rounds; return the summary."""
        run, t = self.run, ck["round"]
        eng, state = run.engine, run.state
        self._stale_figures(t)
        eng.x, eng.server, eng.client_state = ck["x"], ck["server"], ck["client_state"]
        if "host" in ck:  # e.g. Flower strategies (stabkit.algorithms.flower)
            run.algo.load_host_state(ck["host"])
        state.round, state.record, state.snapshots = t, RoundRecord(**ck["record"]), dict(ck["snapshots"])
        state.timers.load(ck["times"])
        run.initial_logged = True
        label = RunDir(self.out, "resume").config.get("label")  # before any change
        RunDir(self.out).unfinish()  # running again: the run is not finished until it ends
        self._open(label)
        with deterministic():  # every logged number
            if t in (ck["rounds"], run.cfg.rounds):  # its row changes (all-data evaluation at the last round)
                self.writer.rewind(ck["metrics_rows"], ck["local_rows"])
                run.log.log(t, state.record, run.log.evaluates(t))
            else:  # round t's rows are logged as an uninterrupted run logs them: keep them
                self.writer.rewind(ck["metrics_rows"] + run.cfg.pairs,
                                   ck["local_rows"] + len(state.record.local) * run.cfg.pairs)
            return self._rounds()

    def _open(self, label: Optional[str]) -> None:
        """config.json (the configuration with the chosen evaluation schedule, the run's facts) and the logs."""
        self.writer.open({**run_facts(self.run), **({"label": label} if label else {})})

    def _rounds(self) -> dict:
        run_rounds(self.run, self.callbacks)
        return self.summary.summary

    def _stale_figures(self, t: int) -> None:
        """A resumed run gains rounds: figures ``stabkit bounds --plot`` drew into ``RUN/figures`` from its first
        ``t`` rounds no longer show it, and are removed (saying so) rather than left beside the new data."""
        figures = RunDir(self.out).file(RunDir.FIGURES)
        if figures.is_dir():
            shutil.rmtree(figures)
            print(f"removed {figures}: drawn from the run's first {t} rounds (redraw with `stabkit bounds "
                  f"{self.out} --plot`)", file=sys.stderr)


class Summary:
    """The round loop's last callback of a run directory: once the logs are flushed, the memory kept for the
    rounds goes back to the system (a sweep's next job may need it), the constants are estimated (unless off,
    interrupted or failed; ``on_stage`` tells the progress) and ``summary.json`` is written (``self.summary``)."""

    def __init__(self, writer: RunWriter, callbacks: list):
        self.writer, self.callbacks, self.summary = writer, callbacks, None

    def on_run_end(self, run, state) -> None:
        alloc.release()
        cfg, df = run.cfg, load_run(self.writer.out)
        interrupted = state.interrupted
        constants = "off (--no-constants)" if not cfg.constants else "skipped: the rounds were interrupted"
        if state.failed:
            constants = "skipped: the run failed"
        if cfg.constants and interrupted is None and state.failed is None:
            tell(self.callbacks, "on_stage", run, state, "constants")
            weights = run.evaluator.population_weights(0)  # trajectory A of pair 0: f = mean_i F_i
            with state.timers.timed("constants_s"):
                try:
                    with threads_for(run.evaluator.flops, run.threads):  # the run's thread policy, as its evaluation
                        estimated = run_constants(cfg, run.task, run.model, run.data, weights, state.snapshots, df)
                    self.writer.constants(estimated, sorted(state.snapshots))
                    constants = "estimated"
                except KeyboardInterrupt:  # the rounds are complete and kept; the summary says what is missing
                    state.status, interrupted = "interrupted", "constants estimation"
                    constants = "skipped: interrupted during the estimation (rerun the pair to get constants.json)"
        notes = {"constants": constants, "divergence_threshold": OVERFLOW, "evaluation": run.describe_evaluation(),
                 **{k: v for k, v in (("diverged_reason", state.diverged), ("interrupted", interrupted),
                                      ("failed_reason", state.failed)) if v}}
        self.summary = self.writer.finish(df, state.status, state.diverged_round, state.round,
                                          state.timers.as_dict(), notes, run.nb)


def run_facts(run) -> dict:
    """What config.json records about ``run`` beside its configuration: the resolved hyperparameters,
    versions, device, threads, allocator, parameter count and smallest client."""
    return {"hp_resolved": resolve_hp(run.cfg.algo, run.cfg.hp), "algo_spec": run.cfg.algo_spec.to_dict(),
            "versions": versions(),
            "device_used": str(run.device), "threads": run.threads, "allocator": alloc.policy(),
            "heap_keep_mb": alloc.limit_bytes() >> 20 if alloc.keeps_freed_blocks() else 0,
            "d": run.model.d, "n_min": int(run.data.n_np[: run.task.num_train_clients].min())}


def versions() -> dict:
    """The software a run's numbers come from, and the CPU kernels it ran (see stabkit.engine.kernels)."""
    return {"stabkit": __version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version(), "kernels": kernel_facts()}
