"""``run_pair``: build everything a paired run needs, run it round by round, and write the run directory.

Validation (config, task, model, algorithm hyperparameters, init file, output directory) all happens
before anything is written. Metrics are flushed atomically every few rounds; a diverging run (NaN/inf, or a
parameter norm or loss above ``OVERFLOW``) stops at the round it happened, and an interrupted one (Ctrl-C)
keeps everything logged so far; Ctrl-C during the constants' estimation keeps the complete rounds and a
summary saying the constants were skipped.
"""
from __future__ import annotations

import os
import platform
import time
from datetime import datetime
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pandas as pd
import torch

from stabkit import __version__
from stabkit.algorithms import build_algorithm, resolve_hp
from stabkit.algorithms.relaxed_init import with_relaxed_init
from stabkit.run.config import RunConfig
from stabkit.run.constants import estimate_constants
from stabkit.engine.data import FederatedData
from stabkit.engine.paired import PairedEngine
from stabkit.engine.threads import run_threads
from stabkit.errors import ConfigError, require
from stabkit.engine.flatmodel import FlatModel
from stabkit.flatness.runlog import SharpnessLog
from stabkit.run.init import initial_parameters
from stabkit.run.memory import require_memory, run_bytes
from stabkit.engine.evaluation import TRAJ, Evaluator
from stabkit.models.registry import build_model
from stabkit.engine.perturbation import build_neighbours
from stabkit.run.runstore import atomic_write_csv, atomic_write_json, prepare_run_dir
from stabkit.run.summary import summarize
from stabkit.tasks import build_task, generated_bytes
from stabkit.tasks.base import Task

FLUSH_EVERY = 10  # rounds between atomic metric flushes
# A run counts as diverged once a parameter vector's norm or a loss exceeds this (or is NaN/inf): far beyond
# any trained model, and 1e12 squared still fits float32's range, so the metrics logged up to then are finite
OVERFLOW = 1e12


def default_out_dir(cfg: RunConfig) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{cfg.algo}-{cfg.perturb}-{cfg.task}-{stamp}"


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


def check_run(cfg: RunConfig, task: Task):
    """Everything about ``cfg`` on ``task`` that can be checked before a tensor is allocated: the algorithm and
    its hyperparameters, model/task compatibility, batch size against the clients' data, the device and the
    memory the run needs. Returns ``(algorithm, module factory, device)``."""
    algo = with_relaxed_init(build_algorithm(cfg.algo, cfg.hp), cfg.ri_beta, cfg.ri_aggregation)
    model_name = cfg.model or task.default_model
    make_module = lambda: build_model(model_name, task, hidden=cfg.hidden)
    with torch.device("meta"):  # validates model/task compatibility and counts parameters, allocating nothing
        d = sum(p.numel() for p in make_module().parameters())
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
    return algo, make_module, device


class PairedRun:
    """A fully built, validated paired experiment (nothing written yet)."""

    def __init__(self, cfg: RunConfig, task: Optional[Task] = None):
        """``task``: a ready-made :class:`Task` (Python API) instead of building ``cfg.task``."""
        self.cfg = cfg
        self.task = task if task is not None else build_checked_task(cfg)
        self.algo, make_module, self.device = check_run(cfg, self.task)
        dtype = getattr(torch, cfg.dtype)
        self.nb = build_neighbours(self.task, cfg.perturb, cfg.client_mode, cfg.pairs, cfg.seed)
        self.data = FederatedData(self.task, self.nb.extra, dtype, self.device)
        self.model = FlatModel(make_module(), self.task.kind, dtype, self.device)
        theta0 = initial_parameters(cfg.init, cfg.seed, cfg.pairs, make_module, self.model)
        self.engine = PairedEngine(cfg, self.algo, self.model, self.data, self.nb, theta0)
        self.evaluator = Evaluator(self.model, self.data, self.nb, cfg.eval_fraction, cfg.seed)
        work = max(self.engine.step_flops, self.evaluator.flops)
        self.threads = run_threads(work) if self.device.type == "cpu" else None  # recorded in config.json
        self.engine.threads = self.evaluator.threads = self.threads
        self.rows: list = []
        self.local_rows: list = []
        self.sharpness = SharpnessLog(self) if cfg.sharpness_rounds else None
        self.t = 0  # rounds done
        self.diverged: Optional[str] = None  # why the run diverged (non-finite or above OVERFLOW), once it has

    def step(self):
        """Run the next round (``self.t + 1``) and log it: one metrics row per pair (evaluated every
        ``eval_every`` rounds and at the last), local discrepancies at ``local_rounds``. The first call also
        logs the initial model as round 0. Returns the engine's :class:`~stabkit.engine.paired.RoundRecord`;
        ``self.finite`` says whether the state is still finite and below ``OVERFLOW`` (else ``self.diverged`` says
        why)."""
        self._log_initial()
        t = self.t + 1
        rec = self.engine.step(t - 1, track_local=(t - 1) in self.cfg.local_rounds,
                               keep_clients=t in self.cfg.sharpness_rounds)
        self.diverged = self._log(t, rec, evaluate=t % self.cfg.eval_every == 0 or t == self.cfg.rounds)
        self.t = t
        return rec

    @property
    def finite(self) -> bool:
        return self.diverged is None

    def _log_initial(self):
        if not self.rows:
            self._log(0, None, evaluate=True)

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
            for name, v in self.evaluator.evaluate(eng.x, None if rec is None else rec.rows).items():
                for j, tr in enumerate(TRAJ):
                    cols[f"{name}_{tr}"] = v[:, j]
                    worst = float(np.max(np.abs(v[:, j])))
                    if why is None and not name.endswith("acc") and not worst <= OVERFLOW:
                        why = f"non-finite {name}" if not np.isfinite(worst) else f"{name} {worst:.3g} > {OVERFLOW:g}"
        self.rows.append(pd.DataFrame(cols))
        if rec is not None:
            for k, l1, l2, l3 in rec.local:
                self.local_rows.append(pd.DataFrame({"round": t - 1, "pair": np.arange(R), "k": k,
                                                     "l1_a": l1[:, 0], "l1_b": l1[:, 1], "l2": l2, "l3": l3}))
        return why

    def run(self, out: Path, progress: Optional[Callable] = None, label: Optional[str] = None) -> dict:
        """Run all rounds, writing ``out``; return the summary. ``label``: the run's legend label in figures
        (recorded in config.json beside the configuration)."""
        cfg = self.cfg
        out = prepare_run_dir(out)
        facts = {"hp_resolved": resolve_hp(cfg.algo, cfg.hp), "versions": versions(), "device_used": str(self.device),
                 "threads": self.threads,                  "d": self.model.d, "n_min": int(self.data.n_np[: self.task.num_train_clients].min())}
        facts.update({"label": label} if label else {})
        atomic_write_json(out / "config.json", {**cfg.to_dict(), **facts})
        start = time.perf_counter()
        status, diverged_round, done, interrupted = "completed", None, self.t, None
        snapshot_rounds = {0, cfg.rounds // 2, cfg.rounds}
        snapshots = [self.engine.x[0, 0].clone()]
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            self._log_initial()
            self._sharpness(0, None, out)
            while self.t < cfg.rounds:
                t = self.t + 1
                rec = self.step()
                if not self.finite:
                    status, diverged_round = "diverged", t
                    break
                done = t
                self._sharpness(t, rec, out)
                if t in snapshot_rounds:
                    snapshots.append(self.engine.x[0, 0].clone())
                if progress is not None:
                    progress(t)
                if t % FLUSH_EVERY == 0:
                    self._flush(out)
        except KeyboardInterrupt:
            status, interrupted = "interrupted", f"round {done + 1}"
        finally:
            torch.use_deterministic_algorithms(previous)
        elapsed = time.perf_counter() - start
        df = self._flush(out)
        constants = "off (--no-constants)" if not cfg.constants else "skipped: the rounds were interrupted"
        if cfg.constants and interrupted is None:
            try:
                weights = self.evaluator.population_weights(0)  # trajectory A of pair 0: f = mean_i F_i
                atomic_write_json(out / "constants.json",
                                  estimate_constants(cfg, self.model, self.data, weights, snapshots, df))
                constants = "estimated"
            except KeyboardInterrupt:  # the rounds are complete and kept; the summary says what is missing
                status, interrupted = "interrupted", "constants estimation"
                constants = "skipped: interrupted during the estimation (rerun the pair to get constants.json)"
        kept = df[df["round"] < diverged_round] if diverged_round else df  # the diverged round: logged, not summarised
        summary = summarize(kept, status=status, diverged_round=diverged_round, wall_s=elapsed, rounds_done=done,
                            out=str(out), nb=self.nb)
        summary.update(constants=constants, divergence_threshold=OVERFLOW)
        summary.update({k: v for k, v in (("diverged_reason", self.diverged), ("interrupted", interrupted)) if v})
        atomic_write_json(out / "summary.json", summary)
        return summary

    def _sharpness(self, t: int, rec, out: Path) -> None:
        if self.sharpness is not None:
            self.sharpness.after_round(t, rec, out)

    def _flush(self, out: Path) -> pd.DataFrame:
        df = pd.concat(self.rows, ignore_index=True)
        atomic_write_csv(out / "metrics.csv", df)
        if self.local_rows:
            atomic_write_csv(out / "local.csv", pd.concat(self.local_rows, ignore_index=True))
        return df


def versions() -> dict:
    return {"stabkit": __version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def run_pair(cfg: RunConfig, out=None, progress: Optional[Callable] = None, task: Optional[Task] = None) -> dict:
    """Build and run a paired experiment; write it to ``out`` (default ``runs/<algo>-<perturb>-<task>-<time>``)."""
    run = PairedRun(cfg, task)
    return run.run(Path(out) if out is not None else default_out_dir(cfg), progress)
