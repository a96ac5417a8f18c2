"""``run_pair`` / ``resume_pair``: build everything a paired run needs, run it round by round, and write
the run directory.

Validation (config, task, model, algorithm hyperparameters, init file, output directory) all happens
before anything is written; a directory that already holds a run is refused unless ``overwrite``. A run's
client counts come from its task (a user's ready-made ``Task`` may have any number of clients), and
``config.json`` records the task and model actually used.
Metrics are appended every few rounds (``stabkit.store.metricslog``); every ``checkpoint_every`` rounds and
after the last one the whole state is checkpointed (``stabkit.store.checkpoint``), so a killed, interrupted
or finished run continues with ``resume_pair`` (also to more rounds) and writes the same bytes as an
uninterrupted run. A diverging run (NaN/inf, or a parameter norm or loss above ``OVERFLOW``) stops at the
round it happened, and an interrupted one (Ctrl-C) keeps everything logged so far; Ctrl-C during the
constants' estimation keeps the complete rounds and a summary saying the constants were skipped. Time
spent training, evaluating, checkpointing and estimating constants is recorded in ``summary.json``.
"""
from __future__ import annotations

import copy
import dataclasses
import os
import platform
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import torch
from torch import nn

from stabkit import __version__, plugins
from stabkit.algorithms import ALGORITHMS, build_algorithm, resolve_hp
from stabkit.algorithms.relaxed_init import with_relaxed_init
from stabkit.config.runconfig import RunConfig, read_mapping, resume_config
from stabkit.engine import cpucache
from stabkit.engine.contract import CheckedAlgorithm, PluginFailed
from stabkit.engine.data import FederatedData
from stabkit.engine.determinism import deterministic
from stabkit.engine.evaluation import Evaluator
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.memory import require_memory, run_bytes
from stabkit.engine.paired import EngineSettings, PairedEngine, RoundRecord
from stabkit.engine.perturbation import build_neighbours
from stabkit.engine.threads import run_threads
from stabkit.errors import ConfigError, require
from stabkit.flatness.runlog import SharpnessLog
from stabkit.models.contract import check_module
from stabkit.models.registry import build_model
from stabkit.run.constants import estimate_constants, with_exact
from stabkit.run.evalbudget import plan_evaluation
from stabkit.run.init import initial_parameters
from stabkit.run.resume_check import checked_checkpoint
from stabkit.run.writer import RunWriter
from stabkit.store.checkpoint import checkpoint_path
from stabkit.store.fserrors import undone_on_fs_error
from stabkit.store.runstore import load_run, prepare_run_dir
from stabkit.store.saved_models import TRAJ, check_models_dir
from stabkit.tasks import build_task, generated_bytes
from stabkit.tasks.base import Task, check_task

# Between checkpoints the logged rows are appended to the logs (and fsynced) every FLUSH_EVERY rounds once
# FLUSH_SECONDS have passed since the last flush: a round of W1 (~9 ms) would otherwise spend ~0.9 ms on
# flushes of 10 rounds' rows; a killed run loses at most that much of its log (a checkpoint flushes always).
FLUSH_EVERY = 10
FLUSH_SECONDS = 1.0
# A run counts as diverged once a parameter vector's norm or a loss exceeds this (or is NaN/inf): far beyond
# any trained model, and 1e12 squared still fits float32's range, so the metrics logged up to then are finite
OVERFLOW = 1e12


def default_out_dir(cfg: RunConfig) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    name = f"{cfg.algo}-{cfg.perturb}-{cfg.task}-{stamp}"
    return Path("runs") / re.sub(r"[^A-Za-z0-9_.+-]", "_", name)  # import paths hold ':'



def resolve_device(name: str) -> torch.device:
    """The torch device for ``--device``. On CUDA also the cuBLAS setting that deterministic mode needs
    (without it ``torch.use_deterministic_algorithms(True)`` refuses every CUDA matmul), and TF32 off for
    cuDNN convolutions as it is for matmuls: a float32 run computes in float32 (cuDNN's TF32 default would
    round conv inputs to 10 mantissa bits, far above the discrepancies a sample perturbation starts with)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"invalid device={name!r}: CUDA is not available here; use cpu or auto")
    if name.startswith("cuda"):
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch.device(name)


def build_checked_task(cfg: RunConfig) -> Task:
    """``cfg``'s task, refused before it is generated if its arrays would not fit in memory."""
    require_memory(generated_bytes(cfg.task, cfg.task_options), f"the {cfg.task} task's generated data",
                   "use fewer --clients or --samples-per-client, or a smaller --dim")
    return build_task(cfg.task, cfg.task_options)


CHECK_ON_CPU_PARAMS = 1 << 21
"""Models up to this many parameters are built on the CPU for :func:`check_run`'s forward check (a few ms;
the global random state is left as it was), larger ones on the ``meta`` device (nothing allocated)."""


def check_run(cfg: RunConfig, task: Task, make_module: Optional[Callable] = None):
    """Everything about ``cfg`` on ``task`` that can be checked before a tensor is allocated: the algorithm and
    its hyperparameters, model/task compatibility, batch size against the clients' data, the device and the
    memory the run needs. ``make_module``: the run's module factory (default: ``cfg.model`` built for
    ``task``). Returns ``(algorithm, device)``."""
    make_module = make_module or _module_maker(cfg, task, None)[0]
    algo = build_algorithm(cfg.algo, cfg.hp)
    if cfg.algo not in ALGORITHMS:  # a plug-in: what its hooks return is checked on every call
        algo = CheckedAlgorithm(algo, cfg.algo)
    algo = with_relaxed_init(algo, cfg.ri_beta, cfg.ri_aggregation)
    with torch.device("meta"):  # counts parameters and validates model/task compatibility, allocating nothing
        module = make_module()
    d = sum(p.numel() for p in module.parameters())
    if d <= CHECK_ON_CPU_PARAMS:  # built for real: meta tensors' first use imports torch's symbolic shapes (~0.6 s)
        with torch.random.fork_rng(devices=[]):
            module = make_module()
    check_module(module, task, cfg.model or task.default_model)
    require(cfg.augment == "none" or len(task.input_shape) == 3, "augment", cfg.augment,
            f"none for task {task.name!r}: crop_flip needs image inputs (C, H, W)")
    largest = max(len(y) for y in task.train_y[:task.num_train_clients])
    require(cfg.batch_size == "full" or cfg.batch_size <= largest, "batch_size", cfg.batch_size,
            f"at most {largest}, the largest client's training set ({task.name}: "
            f"{sum(len(y) for y in task.train_y[:task.num_train_clients]):,} training samples over "
            f"{task.num_train_clients} clients); use --batch-size full for full-batch gradients, or more data "
            "per client (fewer --clients)")
    device = resolve_device(cfg.device)
    needed, largest_part = run_bytes(cfg, task, d, algo, torch.finfo(getattr(torch, cfg.dtype)).bits // 8)
    require_memory(needed, f"this run (largest part: {largest_part})",
                   "use fewer --pairs, --clients or clients per round, or a smaller model", device)
    return algo, device


class PairedRun:
    """A fully built, validated paired experiment (nothing written yet)."""

    def __init__(self, cfg: RunConfig, task: Optional[Task] = None, model=None):
        """``task``: a ready-made :class:`Task` instead of building ``cfg.task``; ``model``: a factory
        ``task -> nn.Module`` or an ``nn.Module`` (every pair starts from its parameters under the default
        init) instead of building ``cfg.model``. ``self.cfg`` is ``cfg`` with the client counts taken
        from the task, the task's and model's names as ``config.json`` records them, and the evaluation
        schedule left open in ``cfg`` chosen from the data size."""
        if task is not None:
            check_task(task, getattr(task, "name", type(task).__name__))
            cfg = cfg.replace(task=task.name)
        self.task = task if task is not None else build_checked_task(cfg)
        cfg = cfg.replace(task_options=dataclasses.replace(
            cfg.task_options, clients=self.task.num_train_clients, heldout_clients=self.task.num_heldout_clients))
        make_module, model_label = _module_maker(cfg, self.task, model)
        self.cfg = cfg = cfg if model is None else cfg.replace(model=model_label)
        self.algo, self.device = check_run(cfg, self.task, make_module)
        dtype = getattr(torch, cfg.dtype)
        self.nb = build_neighbours(self.task, cfg.perturb, cfg.client_mode, cfg.pairs, cfg.seed)
        self.data = FederatedData(self.task, self.nb.extra, dtype, self.device)
        self.eval_plan = self._plan_evaluation(cfg)
        self.cfg = cfg = cfg.replace(eval_every=self.eval_plan.every, eval_fraction=self.eval_plan.fraction)
        self.model = FlatModel(make_module(), self.task.kind, dtype, self.device)
        theta0 = initial_parameters(cfg.init, cfg.seed, cfg.pairs, make_module, self.model)
        self.engine = PairedEngine(engine_settings(cfg), self.algo, self.model, self.data, self.nb, theta0)
        if cfg.algo not in ALGORITHMS:  # a plug-in's hooks tried on round 1 before anything is written
            self.engine.try_round()
        self.evaluator = Evaluator(self.model, self.data, self.nb, cfg.eval_fraction, cfg.seed)
        work = max(self.engine.step_flops, self.evaluator.flops)
        self.threads = run_threads(work) if self.device.type == "cpu" else None  # recorded in config.json
        self.engine.threads = self.evaluator.threads = self.threads
        self._full_evaluator = self.evaluator if cfg.eval_fraction >= 1 else None
        self.rows: list = []  # logged row groups (column dicts) not yet in metrics.csv (all, without a run directory)
        self.local_rows: list = []
        self._flushed = time.perf_counter()  # when the logs were last flushed
        self.times = dict(train_s=0.0, eval_s=0.0, checkpoint_s=0.0, sharpness_s=0.0, wall_s=0.0)
        self.t = 0  # rounds done
        self.sharpness = SharpnessLog(self.model, self.data, self.nb, cfg) if cfg.sharpness_rounds else None
        self.interrupted: Optional[str] = None  # where a Ctrl-C stopped the run
        self.diverged: Optional[str] = None  # why the run diverged (non-finite or above OVERFLOW), once it has
        self.failed: Optional[str] = None  # why a plug-in's hook failed mid-run (the rounds before are kept)
        self._initial_logged = False

    def step(self):
        """Run the next round (``self.t + 1``) and log it: one metrics row per pair (evaluated every
        ``eval_every`` rounds and at the last), local discrepancies at ``local_rounds``. The first call also
        logs the initial model as round 0. Returns the engine's :class:`~stabkit.engine.paired.RoundRecord`;
        ``self.finite`` says whether the state is still finite and below ``OVERFLOW`` (else ``self.diverged`` says
        why)."""
        with deterministic():
            self._log_initial()
            t = self.t + 1
            start = time.perf_counter()
            rec = self.engine.step(t - 1, track_local=(t - 1) in self.cfg.local_rounds,
                                   keep_clients=t in self.cfg.sharpness_rounds)
            self.times["train_s"] += time.perf_counter() - start
            self.diverged = self._log(t, rec, self._evaluates(t))
        self.t = t
        return rec

    @property
    def finite(self) -> bool:
        return self.diverged is None

    def _log_initial(self):
        if not self._initial_logged:
            self._log(0, None, evaluate=True)
            self._initial_logged = True

    def _plan_evaluation(self, cfg: RunConfig):
        data = self.data
        batch = float(np.mean(data.n_np[: self.task.num_train_clients])) if cfg.batch_size == "full" \
            else cfg.batch_size
        first = data.num_task_clients  # rows beyond the task's belong to one model each (Evaluator.own)
        per_model = int(data.n_np[:first].sum()) + int(data.n_np[first:].max(initial=0))
        return plan_evaluation(per_model, len(data.val_y), len(data.test_y),
                               cfg.sampled_clients * cfg.local_steps * batch, cfg.eval_every, cfg.eval_fraction)

    def describe_evaluation(self) -> str:
        """One line: the evaluation schedule of this run and how to ask for exact curves."""
        return self.eval_plan.describe(len(self.data.flat_y), len(self.data.test_y))

    def _evaluate(self, t: int, rec) -> dict:
        """Metrics of round t: on the evaluation subset, and on all data at the last round."""
        if t == self.cfg.rounds and self._full_evaluator is None:
            self._full_evaluator = Evaluator(self.model, self.data, self.nb, 1.0, self.cfg.seed)
            self._full_evaluator.threads = self.threads
        evaluator = self._full_evaluator if t == self.cfg.rounds else self.evaluator
        start = time.perf_counter()
        out = evaluator.evaluate(self.engine.x, None if rec is None else rec.rows)
        self.times["eval_s"] += time.perf_counter() - start
        return out

    def _log(self, t: int, rec, evaluate: bool) -> Optional[str]:
        """Append the rows of round t; return why the run diverged (non-finite or above ``OVERFLOW``) or None."""
        eng, R = self.engine, self.cfg.pairs
        disc = eng.discrepancy()
        cols = {"round": np.full(R, t), "pair": np.arange(R), "disc": disc, "disc_sq": disc ** 2,
                "lr": np.full(R, self.cfg.client_lr(max(t - 1, 0)))}  # row t: the lr of round t - 1 (made x_t)
        if rec is not None:
            cols.update(hit=rec.hit.astype(int), theta_max=rec.theta_max, theta_rms=rec.theta_rms,
                        grad_evals=np.full(R, rec.grad_evals))
        for name, v in eng.server.items():
            cols[f"disc_{name}"] = (v[:, 0] - v[:, 1]).norm(dim=-1).cpu().numpy()
            for j, tr in enumerate(TRAJ):
                cols[f"norm_{name}_{tr}"] = v[:, j].norm(dim=-1).cpu().numpy()
        norm = float(eng.x.norm(dim=-1).max())
        why = None if norm <= OVERFLOW else ("non-finite parameters" if not np.isfinite(norm) else
                                             f"parameter norm {norm:.3g} > {OVERFLOW:g}")
        if evaluate and why is None:
            for name, v in self._evaluate(t, rec).items():
                for j, tr in enumerate(TRAJ):
                    cols[f"{name}_{tr}"] = v[:, j]
                    worst = float(np.max(np.abs(v[:, j])))
                    if why is None and not name.endswith("acc") and not worst <= OVERFLOW:
                        why = f"non-finite {name}" if not np.isfinite(worst) else f"{name} {worst:.3g} > {OVERFLOW:g}"
        self.rows.append(cols)
        if rec is not None:
            for k, l1, l2, l3 in rec.local:
                self.local_rows.append({"round": np.full(R, t - 1), "pair": np.arange(R), "k": np.full(R, k),
                                        "l1_a": l1[:, 0], "l1_b": l1[:, 1], "l2": l2, "l3": l3})
        return why

    def _evaluates(self, t: int) -> bool:
        return t % self.cfg.eval_every == 0 or t == self.cfg.rounds

    def run(self, out: Path, progress: Optional[Callable] = None, overwrite: bool = False,
            label: Optional[str] = None) -> dict:
        """Run all rounds, writing ``out`` (refused if it holds a run, unless ``overwrite``); return the
        summary. ``progress(t, stats)`` is called after every round (stats: ``eval_share``); ``label``: the
        run's legend label in figures (recorded in config.json beside the configuration)."""
        check_models_dir(out, self.cfg.save_models)
        with undone_on_fs_error(out, keep=checkpoint_path(out).is_file):  # a full disk: a resumable run is kept
            return self._run_new(prepare_run_dir(out, overwrite), progress, label)

    def _run_new(self, out: Path, progress, label) -> dict:
        """Round 0 and every round after it, into the prepared run directory ``out``."""
        self._open(out, label)
        start = time.perf_counter()  # round 0's evaluation, sharpness and models count in the run's time
        snapshots = {0: self.engine.x[0, 0].clone()}
        with deterministic():  # every logged number, round 0's included
            self._log_initial()
            self._sharpness(0, None, out)
            self._save_models(0)
            self.times["wall_s"] += time.perf_counter() - start
            return self._run_rounds(out, 1, snapshots, progress)

    def resume(self, out: Path, progress: Optional[Callable] = None, checkpoint: Optional[dict] = None) -> dict:
        """Continue the run in ``out`` from its checkpoint up to ``self.cfg.rounds``; return the summary.
        ``checkpoint``: the one ``checked_checkpoint(self, out)`` returned (else it is read and checked here)."""
        out = Path(out)
        ck = checkpoint or checked_checkpoint(self, out)  # consistent with the logs, or refused, nothing touched
        t = ck["round"]
        eng = self.engine
        eng.x, eng.server, eng.client_state = ck["x"], ck["server"], ck["client_state"]
        self.t, self._initial_logged = t, True
        self.times.update(ck["times"])
        if self.sharpness is not None:
            self.sharpness.resume(out, t)
        label = read_mapping(out / "config.json", "resume", "run's config.json").get("label")  # read before any change
        (out / "summary.json").unlink(missing_ok=True)  # running again: the run is not finished until it ends
        self._open(out, label)
        rec = RoundRecord(**ck["record"])
        with deterministic():  # every logged number
            if t in (ck["rounds"], self.cfg.rounds):  # its row changes (all-data evaluation at the last round)
                self.writer.rewind(ck["metrics_rows"], ck["local_rows"])
                self._log(t, rec, self._evaluates(t))
            else:  # round t's rows are logged as an uninterrupted run logs them: keep them
                self.writer.rewind(ck["metrics_rows"] + self.cfg.pairs,
                                   ck["local_rows"] + len(rec.local) * self.cfg.pairs)
            return self._run_rounds(out, t + 1, dict(ck["snapshots"]), progress, last_rec=rec)

    def _open(self, out: Path, label: Optional[str]) -> None:
        """The writer of ``out``: config.json (with the chosen evaluation schedule and the run's facts) and
        the metric logs."""
        cfg = self.cfg
        facts = {"hp_resolved": resolve_hp(cfg.algo, cfg.hp), "versions": versions(), "device_used": str(self.device),
                 "threads": self.threads, "cpu_cache_mb": cpucache.stats()["limit"] >> 20, "d": self.model.d,
                 "n_min": int(self.data.n_np[: self.task.num_train_clients].min())}
        facts.update({"label": label} if label else {})
        self.writer = RunWriter(out, cfg, self.times)
        self.writer.open(facts)

    def _run_rounds(self, out: Path, first: int, snapshots: dict, progress, last_rec=None) -> dict:
        cfg, eng = self.cfg, self.engine
        status, diverged_round, done, rec = "completed", None, first - 1, last_rec
        snapshot_rounds = {0, cfg.rounds // 2, cfg.rounds}
        session_start = time.perf_counter()
        wall_before = self.times["wall_s"]
        in_round = False
        try:
            while self.t < cfg.rounds:
                in_round, t = True, self.t + 1
                rec = self.step()
                if not self.finite:
                    status, diverged_round = "diverged", t
                    break
                done = t
                self._sharpness(t, rec, out)
                if t in snapshot_rounds:
                    snapshots[t] = eng.x[0, 0].clone()
                self.times["wall_s"] = wall_before + time.perf_counter() - session_start
                self._save_models(t)
                if cfg.checkpoint_every and (t % cfg.checkpoint_every == 0 or t == cfg.rounds):
                    self._checkpoint(t, rec, snapshots)
                elif t % FLUSH_EVERY == 0 and time.perf_counter() - self._flushed >= FLUSH_SECONDS:
                    self._flush()
                in_round = False  # from here to the next round's start the state is consistent and saved
                if progress is not None:
                    progress(t, {"eval_share": self.times["eval_s"] / max(self.times["wall_s"], 1e-9)})
        except PluginFailed as e:  # a plug-in's hook failed mid-run: the rounds before are kept
            status, self.failed = "failed", str(e)
        except KeyboardInterrupt:
            status, self.interrupted = "interrupted", f"round {done + 1}"
            if not in_round and cfg.checkpoint_every and done >= first:  # a consistent state: keep it
                self._checkpoint(done, rec, snapshots)
        self.times["wall_s"] = wall_before + time.perf_counter() - session_start
        self._flush()
        cpucache.release()  # the blocks kept for the rounds go back to the system (a sweep's next job may need them)
        return self._finish(out, status, diverged_round, done, snapshots)

    def _finish(self, out: Path, status: str, diverged_round, done: int, snapshots: dict) -> dict:
        """Estimate the constants (unless off or interrupted) and write the summary."""
        df = load_run(out)
        times = {**self.times, "constants_s": 0.0}
        interrupted = self.interrupted
        constants = "off (--no-constants)" if not self.cfg.constants else "skipped: the rounds were interrupted"
        if self.failed:
            constants = "skipped: the run failed"
        if self.cfg.constants and interrupted is None and self.failed is None:
            start = time.perf_counter()
            rounds = sorted(snapshots)
            weights = self.evaluator.population_weights(0)  # trajectory A of pair 0: f = mean_i F_i
            try:
                estimated = estimate_constants(self.cfg, self.model, self.data, weights,
                                               [snapshots[r] for r in rounds], df)
                if self.cfg.model in (None, self.task.default_model):  # the task's closed form is its model's
                    estimated = with_exact(estimated, self.task.constants, self.cfg.weight_decay)
                self.writer.constants(estimated, rounds)
                constants = "estimated"
            except KeyboardInterrupt:  # the rounds are complete and kept; the summary says what is missing
                status, interrupted = "interrupted", "constants estimation"
                constants = "skipped: interrupted during the estimation (rerun the pair to get constants.json)"
            times["constants_s"] = time.perf_counter() - start
        notes = {"constants": constants, "divergence_threshold": OVERFLOW, "evaluation": self.describe_evaluation(),
                 **{k: v for k, v in (("diverged_reason", self.diverged), ("interrupted", interrupted),
                                      ("failed_reason", self.failed)) if v}}
        return self.writer.finish(df, status, diverged_round, done, times, notes, self.nb)

    def _sharpness(self, t: int, rec, out: Path) -> None:
        if self.sharpness is not None:
            start = time.perf_counter()
            self.sharpness.after_round(t, self.engine.x, rec, out)
            self.times["sharpness_s"] = self.times.get("sharpness_s", 0.0) + time.perf_counter() - start

    def _flush(self) -> None:
        rows, local, self.rows, self.local_rows = self.rows, self.local_rows, [], []
        self.writer.flush(rows, local)
        self._flushed = time.perf_counter()

    def _save_models(self, t: int) -> None:
        """The global models after round t, if ``--save-models`` asks for round t."""
        self.writer.save_models(t, self.engine.x, self.model.names, self.model.shapes)

    def _checkpoint(self, t: int, rec, snapshots: dict) -> None:
        """Flush the logs and save the state after round t (with the log positions before round t)."""
        self._flush()
        eng = self.engine
        self.writer.checkpoint(t, {"x": eng.x, "server": eng.server, "client_state": eng.client_state}, rec, snapshots)


def rebuilt_engine(cfg: RunConfig) -> PairedEngine:
    """A fresh engine of the run ``cfg`` describes (its task, model, neighbours and initial state), e.g. to
    measure a saved run's models or replay its rounds (``stabkit.flatness``)."""
    return PairedRun(cfg).engine


def engine_settings(cfg: RunConfig) -> EngineSettings:
    """The fields of ``cfg`` the engine reads."""
    return EngineSettings(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(EngineSettings)})


def _module_maker(cfg: RunConfig, task: Task, model) -> tuple:
    """``(make_module, label)``: a function building a fresh module for the run, and the name config.json
    records (a built-in name, an import path, or a description of a module passed from Python)."""
    if model is None:
        name = cfg.model or task.default_model
        return (lambda: build_model(name, task, hidden=cfg.hidden)), name
    if isinstance(model, nn.Module):
        label = f"instance of {plugins.import_path_of(type(model)) or type(model).__name__}"
        return (lambda: copy.deepcopy(model)), label
    if callable(model):
        label = plugins.import_path_of(model) or getattr(model, "__name__", repr(model))

        def make():
            module = plugins.call("model", label, model, task)
            require(isinstance(module, nn.Module), "model", label,
                    f"a factory returning a torch.nn.Module, but it returned {type(module).__name__}")
            return module

        return make, label
    raise ConfigError(f"invalid model={model!r}: a factory task -> torch.nn.Module, or an nn.Module")


def versions() -> dict:
    return {"stabkit": __version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


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
