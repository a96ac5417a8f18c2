"""``RunRecorder``: a built :class:`~stabkit.run.experiment.PairedRun` run round by round into its run
directory, so that ``PairedRun`` only builds, steps and logs rounds.

It opens the run's writer (``config.json`` with the run's facts, the metric logs), flushes the logged rows
every ``FLUSH_EVERY`` rounds once ``FLUSH_SECONDS`` have passed and at every checkpoint, checkpoints every
``checkpoint_every`` rounds and after the last, keeps the parameter snapshots the constants are estimated
at, measures sharpness and saves models where asked, and writes ``constants.json`` and ``summary.json``
at the end. A Ctrl-C between rounds keeps a consistent checkpoint; during the constants' estimation it keeps
the complete rounds and a summary saying the constants were skipped.
"""
from __future__ import annotations

import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch

from stabkit import __version__
from stabkit.algorithms import resolve_hp
from stabkit.engine import alloc
from stabkit.engine.contract import PluginFailed
from stabkit.engine.determinism import deterministic
from stabkit.engine.kernels import kernel_facts
from stabkit.engine.paired import RoundRecord
from stabkit.engine.threads import threads_for
from stabkit.errors import ConfigError
from stabkit.privacy.runfile import write_privacy
from stabkit.run.constants import run_constants
from stabkit.run.roundlog import OVERFLOW
from stabkit.run.writer import RunWriter
from stabkit.store.rundir import RunDir
from stabkit.store.runstore import load_run

# Between checkpoints the logged rows are appended to the logs (and fsynced) every FLUSH_EVERY rounds once
# FLUSH_SECONDS have passed since the last flush: a round of W1 (~9 ms) would otherwise spend ~0.9 ms on
# flushes of 10 rounds' rows; a killed run loses at most that much of its log (a checkpoint flushes always).
FLUSH_EVERY = 10
FLUSH_SECONDS = 1.0


class RunRecorder:
    """Writes the run ``run`` (a ``PairedRun``) into the directory ``out``."""

    def __init__(self, run, out: Path):
        self.run, self.out = run, Path(out)
        self.writer = RunWriter(self.out, run.cfg, run.times)
        self._flushed = time.perf_counter()  # when the logs were last flushed
        self._progress: Optional[Callable] = None  # the caller's progress(t, stats), told each stage after the rounds

    def start(self, label: Optional[str], progress: Optional[Callable]) -> dict:
        """Log round 0 and run every round; return the summary."""
        run, self._progress = self.run, progress
        self._open(label)
        start = time.perf_counter()  # round 0's evaluation, sharpness and models count in the run's time
        snapshots = {0: run.engine.x[0, 0].clone()}
        with deterministic():  # every logged number, round 0's included
            run.log_initial()
            self._sharpness(0, None)
            self._save_models(0)
            run.times["wall_s"] += time.perf_counter() - start
            return self._rounds(1, snapshots, progress)

    def resume(self, ck: dict, progress: Optional[Callable]) -> dict:
        """Continue from the checked checkpoint ``ck`` up to the run's rounds; return the summary."""
        run, t, self._progress = self.run, ck["round"], progress
        eng = run.engine
        self._stale_figures(t)
        eng.x, eng.server, eng.client_state = ck["x"], ck["server"], ck["client_state"]
        if "host" in ck:  # e.g. Flower strategies (stabkit.algorithms.flower)
            run.algo.load_host_state(ck["host"])
        run.t, run.initial_logged = t, True
        run.times.update(ck["times"])
        if run.sharpness is not None:
            run.sharpness.resume(self.out, t)
        label = RunDir(self.out, "resume").config.get("label")  # before any change
        RunDir(self.out).unfinish()  # running again: the run is not finished until it ends
        self._open(label)
        rec = RoundRecord(**ck["record"])
        with deterministic():  # every logged number
            if t in (ck["rounds"], run.cfg.rounds):  # its row changes (all-data evaluation at the last round)
                self.writer.rewind(ck["metrics_rows"], ck["local_rows"])
                run.log.log(t, rec, run.log.evaluates(t))
            else:  # round t's rows are logged as an uninterrupted run logs them: keep them
                self.writer.rewind(ck["metrics_rows"] + run.cfg.pairs,
                                   ck["local_rows"] + len(rec.local) * run.cfg.pairs)
            return self._rounds(t + 1, dict(ck["snapshots"]), progress, last_rec=rec)

    def _open(self, label: Optional[str]) -> None:
        """config.json (the configuration with the chosen evaluation schedule, the run's facts) and the logs."""
        self.writer.open({**run_facts(self.run), **({"label": label} if label else {})})

    def _rounds(self, first: int, snapshots: dict, progress, last_rec=None) -> dict:
        run, cfg = self.run, self.run.cfg
        status, diverged_round, done, rec = "completed", None, first - 1, last_rec
        snapshot_rounds = {0, cfg.rounds // 2, cfg.rounds}
        session_start, wall_before = time.perf_counter(), run.times["wall_s"]
        in_round = False
        try:
            while run.t < cfg.rounds:
                in_round, t = True, run.t + 1
                rec = run.step()
                if not run.finite:
                    status, diverged_round = "diverged", t
                    break
                done = t
                self._after_round(t, rec, snapshots, snapshot_rounds,
                                  lambda: wall_before + time.perf_counter() - session_start)
                in_round = False  # from here to the next round's start the state is consistent and saved
                if progress is not None:
                    progress(t, {"eval_share": run.times["eval_s"] / max(run.times["wall_s"], 1e-9)})
        except PluginFailed as e:  # a plug-in's hook failed mid-run: the rounds before are kept
            status, run.failed = "failed", str(e)
        except KeyboardInterrupt:
            status, run.interrupted = "interrupted", f"round {done + 1}"
            if not in_round and cfg.checkpoint_every and done >= first:  # a consistent state: keep it
                self._checkpoint(done, rec, snapshots)
        except ConfigError:  # the algorithm refused mid-run (a Flower strategy raised): the rows logged so far stay
            self._flush()
            raise
        run.times["wall_s"] = wall_before + time.perf_counter() - session_start
        self._flush()
        alloc.release()  # the memory kept for the rounds goes back to the system (a sweep's next job may need them)
        return self._finish(status, diverged_round, done, snapshots)

    def _after_round(self, t: int, rec, snapshots: dict, snapshot_rounds: set, wall_s: Callable) -> None:
        """Sharpness, snapshot, saved models, and a checkpoint or a flush when due after round t; ``wall_s()``:
        the run's wall time so far."""
        run, cfg = self.run, self.run.cfg
        self._sharpness(t, rec)
        if t in snapshot_rounds:
            snapshots[t] = run.engine.x[0, 0].clone()
        run.times["wall_s"] = wall_s()
        self._save_models(t)
        if run.updates is not None:
            self.writer.save_updates(t, *run.updates)
        if cfg.checkpoint_every and (t % cfg.checkpoint_every == 0 or t == cfg.rounds):
            self._checkpoint(t, rec, snapshots)
        elif t % FLUSH_EVERY == 0 and time.perf_counter() - self._flushed >= FLUSH_SECONDS:
            self._flush()

    def _finish(self, status: str, diverged_round, done: int, snapshots: dict) -> dict:
        """Estimate the constants (unless off or interrupted) and write the summary."""
        run, cfg = self.run, self.run.cfg
        df = load_run(self.out)
        write_privacy(self.out, run.privacy, df, cfg.dp_noise)  # a DP run's epsilons (stabkit.privacy)
        times = {**run.times, "constants_s": 0.0}
        interrupted = run.interrupted
        constants = "off (--no-constants)" if not cfg.constants else "skipped: the rounds were interrupted"
        if run.failed:
            constants = "skipped: the run failed"
        if cfg.constants and interrupted is None and run.failed is None:
            self._stage(done, "constants")
            start = time.perf_counter()
            weights = run.evaluator.population_weights(0)  # trajectory A of pair 0: f = mean_i F_i
            try:
                with threads_for(run.evaluator.flops, run.threads):  # the run's thread policy, as its evaluation
                    estimated = run_constants(cfg, run.task, run.model, run.data, weights, snapshots, df)
                self.writer.constants(estimated, sorted(snapshots))
                constants = "estimated"
            except KeyboardInterrupt:  # the rounds are complete and kept; the summary says what is missing
                status, interrupted = "interrupted", "constants estimation"
                constants = "skipped: interrupted during the estimation (rerun the pair to get constants.json)"
            times["constants_s"] = time.perf_counter() - start
        notes = {"constants": constants, "divergence_threshold": OVERFLOW, "evaluation": run.describe_evaluation(),
                 **{k: v for k, v in (("diverged_reason", run.diverged), ("interrupted", interrupted),
                                      ("failed_reason", run.failed)) if v}}
        return self.writer.finish(df, status, diverged_round, done, times, notes, run.nb)

    def _stage(self, t: int, stage: str) -> None:
        """Tell the caller's progress which phase after the rounds has begun (``stats["stage"]``)."""
        if self._progress is not None:
            self._progress(t, {"stage": stage})

    def _stale_figures(self, t: int) -> None:
        """A resumed run gains rounds: figures ``stabkit bounds --plot`` drew into ``RUN/figures`` from its first
        ``t`` rounds no longer show it, and are removed (saying so) rather than left beside the new data."""
        figures = RunDir(self.out).file(RunDir.FIGURES)
        if figures.is_dir():
            shutil.rmtree(figures)
            print(f"removed {figures}: drawn from the run's first {t} rounds (redraw with `stabkit bounds "
                  f"{self.out} --plot`)", file=sys.stderr)

    def _sharpness(self, t: int, rec) -> None:
        run = self.run
        if run.sharpness is not None:
            start = time.perf_counter()
            run.sharpness.after_round(t, run.engine.x, rec, self.out)
            run.times["sharpness_s"] = run.times.get("sharpness_s", 0.0) + time.perf_counter() - start

    def _flush(self) -> None:
        self.writer.flush(*self.run.log.take())
        self._flushed = time.perf_counter()

    def _save_models(self, t: int) -> None:
        """The global models after round t, if ``--save-models`` asks for round t."""
        self.writer.save_models(t, self.run.engine.x, self.run.model.names, self.run.model.shapes)

    def _checkpoint(self, t: int, rec, snapshots: dict) -> None:
        """Flush the logs and save the state after round t (with the log positions before round t)."""
        self._flush()
        eng = self.run.engine
        state = {"x": eng.x, "server": eng.server, "client_state": eng.client_state}
        host = self.run.algo.host_state()
        self.writer.checkpoint(t, {**state, **({"host": host} if host is not None else {})}, rec, snapshots)


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
