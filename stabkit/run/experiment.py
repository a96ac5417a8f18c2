"""``run_pair`` / ``resume_pair``: build everything a paired run needs, run it round by round, and write
the run directory.

Validation (config, task, model, algorithm hyperparameters, device, memory: ``stabkit.run.preflight``;
init file, output directory) all happens before anything is written; a directory that already holds a run
is refused unless ``overwrite``. A run's client counts come from its task (a user's ready-made ``Task`` may
have any number of clients), and ``config.json`` records the task and model actually used.
``PairedRun`` builds the run and says what its round t is (``advance``: the engine's step, logged by
``stabkit.run.roundlog``); the round loop (``stabkit.run.loop``) runs the rounds, and ``stabkit.run.recorder``
runs it into a directory with that directory's callbacks (metrics appended every few rounds, checkpoints every
``checkpoint_every`` rounds and after the last, constants and summary at the end). A killed, interrupted or finished
run continues with ``resume_pair`` (also to more rounds) and writes the same bytes as an uninterrupted run.
A diverging run (NaN/inf, or a parameter norm or loss above ``OVERFLOW``) stops at the round it happened,
and an interrupted one (Ctrl-C) keeps everything logged so far. Time spent training, evaluating,
checkpointing and estimating constants is recorded in ``summary.json``.
"""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional, Sequence

from stabkit.config.runconfig import RunConfig, resume_config
from stabkit.engine.determinism import deterministic
from stabkit.engine.evaluation import Evaluator
from stabkit.engine.paired import PairedEngine
from stabkit.engine.threads import run_threads
from stabkit.privacy.runfile import run_schedule
from stabkit.run.assembly import assemble, engine_settings
from stabkit.run.loop import RunState
from stabkit.run.preflight import preflight
from stabkit.run.recorder import RunRecorder
from stabkit.run.resume_check import checked_checkpoint
from stabkit.run.roundlog import OVERFLOW, RoundLog
from stabkit.store.checkpoint import checkpoint_path
from stabkit.store.fserrors import undone_on_fs_error
from stabkit.store.runstore import prepare_run_dir
from stabkit.store.saved_models import check_models_dir
from stabkit.tasks.base import Task

__all__ = ["OVERFLOW", "PairedRun", "default_out_dir", "engine_settings", "rebuilt_engine", "resume_config",
           "resume_pair", "run_pair"]


def default_out_dir(cfg: RunConfig) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{cfg.algo}-{cfg.perturb}-{cfg.task}-{stamp}"
    return Path("runs") / re.sub(r"[^A-Za-z0-9_.+-]", "_", name)  # import paths hold ':'


class PairedRun:
    """A fully built, validated paired experiment (nothing written yet)."""

    def __init__(self, cfg: RunConfig, task: Optional[Task] = None, model=None):
        """``task``: a ready-made :class:`Task` instead of building ``cfg.task``; ``model``: a factory
        ``task -> nn.Module`` or an ``nn.Module`` (every pair starts from its parameters under the default
        init) instead of building ``cfg.model``. ``self.cfg`` is ``cfg`` with the client counts taken
        from the task, the task's and model's names as ``config.json`` records them, and the evaluation
        schedule left open in ``cfg`` chosen from the data size."""
        checked = preflight(cfg, task, model)
        self.task, self.algo, self.device = checked.task, checked.algo, checked.device
        parts = assemble(checked)
        self.cfg = cfg = parts.cfg
        self.nb, self.data, self.eval_plan, self.model, self.engine = (parts.nb, parts.data, parts.eval_plan,
                                                                       parts.model, parts.engine)
        self.privacy = run_schedule(self.algo, self.task.num_train_clients, cfg.sampled_clients, cfg.rounds)
        self.evaluator = Evaluator(self.model, self.data, self.nb, cfg.eval_fraction, cfg.seed)
        work = max(self.engine.step_flops, self.evaluator.flops)
        self.threads = run_threads(work) if self.device.type == "cpu" else None  # recorded in config.json
        self.engine.threads = self.evaluator.threads = self.threads
        self.state = RunState(cfg.rounds)  # the round done, the last record, the status and the time accounts
        self.log = RoundLog(cfg, self.engine, self.evaluator, self.state.timers)
        self.initial_logged = False  # round 0 (the initial models) is logged
        self.updates = None  # --store-updates: the last round's (cohort [R, s], A's client updates [R, s, d])

    @property
    def rows(self) -> list:
        """Logged row groups (column dicts) not yet in metrics.csv (all of them, without a run directory)."""
        return self.log.rows

    @property
    def local_rows(self) -> list:
        """Logged local-discrepancy row groups not yet in local.csv (all of them, without a run directory)."""
        return self.log.local_rows

    def start(self) -> None:
        """Log round 0 (the initial models), once: the round loop's first act (``stabkit.run.loop``)."""
        if not self.initial_logged:
            with deterministic():
                self.log.log(0, None, evaluate=True)
            self.initial_logged = True

    def advance(self, t: int) -> Optional[str]:
        """Run round t and log it: one metrics row per pair (evaluated every ``eval_every`` rounds and at the
        last), local discrepancies at ``local_rounds``; the record goes to ``self.state.record``. Returns why the
        state is no longer finite and below ``OVERFLOW`` (None while it is)."""
        with deterministic():
            self.start()
            with self.state.timers.timed("train_s"):
                x_before = self.engine.x[:, 0]
                rec = self.engine.step(t - 1, track_local=(t - 1) in self.cfg.local_rounds,
                                       keep_clients=t in self.cfg.sharpness_rounds or self.cfg.store_updates)
                if self.cfg.store_updates:  # A's client updates y_i - x_{t-1}, [R, s, d] (stabkit.store.updates)
                    self.updates = (rec.rows[:, 0], rec.clients[:, 0] - x_before[:, None, :])
                    if t not in self.cfg.sharpness_rounds:
                        rec.clients = None  # not kept in the checkpoint's record
            self.state.record = rec
            return self.log.log(t, rec, self.log.evaluates(t))

    def step(self):
        """Run the next round (``self.state.round + 1``) outside the round loop (the first call also logs round
        0) and return its :class:`~stabkit.engine.paired.RoundRecord`; ``self.finite`` says whether the state is
        still finite and below ``OVERFLOW`` (else ``self.state.diverged`` says why)."""
        t = self.state.round + 1
        self.state.diverged = self.advance(t)
        self.state.round = t
        return self.state.record

    @property
    def finite(self) -> bool:
        return self.state.diverged is None

    def describe_evaluation(self) -> str:
        """One line: the evaluation schedule of this run and how to ask for exact curves."""
        return self.eval_plan.describe(len(self.data.flat_y), len(self.data.test_y))

    def run(self, out: Path, progress: Optional[Callable] = None, overwrite: bool = False,
            label: Optional[str] = None, callbacks: Sequence = ()) -> dict:
        """Run all rounds, writing ``out`` (refused if it holds a run, unless ``overwrite``); return the
        summary. ``progress(t, stats)`` is called after every round (stats: ``eval_share``); ``label``: the
        run's legend label in figures (recorded in config.json beside the configuration); ``callbacks``: more
        hooks of the round loop (``stabkit.run.loop``), told after the run directory's own."""
        check_models_dir(out, self.cfg.save_models)
        with undone_on_fs_error(out, keep=checkpoint_path(out).is_file):  # a full disk: a resumable run is kept
            return RunRecorder(self, prepare_run_dir(out, overwrite), progress, callbacks).start(label)

    def resume(self, out: Path, progress: Optional[Callable] = None, checkpoint: Optional[dict] = None,
               callbacks: Sequence = ()) -> dict:
        """Continue the run in ``out`` from its checkpoint up to ``self.cfg.rounds``; return the summary.
        ``checkpoint``: the one ``checked_checkpoint(self, out)`` returned (else it is read and checked here)."""
        ck = checkpoint or checked_checkpoint(self, Path(out))  # consistent with the logs, or refused, nothing touched
        return RunRecorder(self, Path(out), progress, callbacks).resume(ck)


def rebuilt_engine(cfg: RunConfig) -> PairedEngine:
    """A fresh engine of the run ``cfg`` describes (its task, model, neighbours and initial state), e.g. to
    measure a saved run's models or replay its rounds (``stabkit.flatness``)."""
    return PairedRun(cfg).engine


def run_pair(cfg: RunConfig, out=None, progress: Optional[Callable] = None, task: Optional[Task] = None,
             overwrite: bool = False, label: Optional[str] = None, model=None) -> dict:
    """Build and run a paired experiment; write it to ``out`` (default ``runs/<algo>-<perturb>-<task>-<time>``;
    a directory that holds a run is refused unless ``overwrite``). ``task`` and ``model`` as for :class:`PairedRun`."""
    run = PairedRun(cfg, task, model)
    return run.run(Path(out) if out is not None else default_out_dir(run.cfg), progress, overwrite, label)


def resume_pair(out, rounds: Optional[int] = None, progress: Optional[Callable] = None,
                task: Optional[Task] = None, **changes) -> dict:
    """Continue the run in ``out`` from its checkpoint (to ``rounds`` if given, else its own)."""
    return PairedRun(resume_config(out, rounds, **changes), task).resume(Path(out), progress)
