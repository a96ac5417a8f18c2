"""``run_pair``: build everything a paired run needs, run it round by round, and write the run directory.

Validation (config, task, model, algorithm hyperparameters, init file, output directory) all happens
before anything is written. A run's client counts come from its task (a user's ready-made ``Task`` may
have any number of clients), and ``config.json`` records the task and model actually used. Metrics are flushed atomically every few rounds; a diverging run (NaN/inf)
stops at the round it happened, and an interrupted one (Ctrl-C) keeps everything logged so far.
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
import pandas as pd
import torch
from torch import nn

from stabkit import __version__, plugins
from stabkit.algorithms import build_algorithm, resolve_hp
from stabkit.algorithms.relaxed_init import with_relaxed_init
from stabkit.run.config import RunConfig
from stabkit.run.constants import estimate_constants
from stabkit.engine.data import FederatedData
from stabkit.engine.paired import PairedEngine
from stabkit.errors import ConfigError, require
from stabkit.engine.flatmodel import FlatModel
from stabkit.run.init import initial_parameters
from stabkit.engine.evaluation import TRAJ, Evaluator
from stabkit.models.registry import build_model
from stabkit.engine.perturbation import build_neighbours
from stabkit.run.runstore import atomic_write_csv, atomic_write_json, prepare_run_dir
from stabkit.run.summary import summarize
from stabkit.tasks import build_task
from stabkit.tasks.base import Task, check_task

FLUSH_EVERY = 10  # rounds between atomic metric flushes


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


class PairedRun:
    """A fully built, validated paired experiment (nothing written yet)."""

    def __init__(self, cfg: RunConfig, task: Optional[Task] = None, model=None):
        """``task``: a ready-made :class:`Task` instead of building ``cfg.task``; ``model``: a factory
        ``task -> nn.Module`` or an ``nn.Module`` (every pair starts from its parameters under the default
        init) instead of building ``cfg.model``. ``self.cfg`` is ``cfg`` with the client counts taken
        from the task, and the task's and model's names as ``config.json`` records them."""
        self.algo = with_relaxed_init(build_algorithm(cfg.algo, cfg.hp), cfg.ri_beta, cfg.ri_aggregation)
        if task is not None:
            check_task(task, getattr(task, "name", type(task).__name__))
            cfg = cfg.replace(task=task.name)
        self.task = task if task is not None else build_task(cfg.task, cfg.task_options)
        cfg = cfg.replace(task_options=dataclasses.replace(
            cfg.task_options, clients=self.task.num_train_clients, heldout_clients=self.task.num_heldout_clients))
        make_module, model_label = _module_maker(cfg, self.task, model)
        self.cfg = cfg = cfg if model is None else cfg.replace(model=model_label)
        make_module()  # validates model/task compatibility before anything else happens
        require(cfg.augment == "none" or len(self.task.input_shape) == 3, "augment", cfg.augment,
                f"none for task {self.task.name!r}: crop_flip needs image inputs (C, H, W)")
        self.device = resolve_device(cfg.device)
        dtype = getattr(torch, cfg.dtype)
        self.nb = build_neighbours(self.task, cfg.perturb, cfg.client_mode, cfg.pairs, cfg.seed)
        self.data = FederatedData(self.task, self.nb.extra, dtype, self.device)
        self.model = FlatModel(make_module(), self.task.kind, dtype, self.device)
        theta0 = initial_parameters(cfg.init, cfg.seed, cfg.pairs, make_module, self.model)
        self.engine = PairedEngine(cfg, self.algo, self.model, self.data, self.nb, theta0)
        self.evaluator = Evaluator(self.model, self.data, self.nb, cfg.eval_fraction, cfg.seed)
        self.rows: list = []
        self.local_rows: list = []
        self.t = 0  # rounds done
        self.finite = True  # False once the model or an evaluated loss is no longer finite

    def step(self):
        """Run the next round (``self.t + 1``) and log it: one metrics row per pair (evaluated every
        ``eval_every`` rounds and at the last), local discrepancies at ``local_rounds``. The first call also
        logs the initial model as round 0. Returns the engine's :class:`~stabkit.engine.paired.RoundRecord`;
        ``self.finite`` says whether the state is still finite."""
        self._log_initial()
        t = self.t + 1
        rec = self.engine.step(t - 1, track_local=(t - 1) in self.cfg.local_rounds)
        self.finite = self._log(t, rec, evaluate=t % self.cfg.eval_every == 0 or t == self.cfg.rounds)
        self.t = t
        return rec

    def _log_initial(self):
        if not self.rows:
            self._log(0, None, evaluate=True)

    def _log(self, t: int, rec, evaluate: bool) -> bool:
        """Append the rows of round t; return False if the state is no longer finite."""
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
        finite = bool(torch.isfinite(eng.x).all())
        if evaluate and finite:
            for name, v in self.evaluator.evaluate(eng.x, None if rec is None else rec.rows).items():
                for j, tr in enumerate(TRAJ):
                    cols[f"{name}_{tr}"] = v[:, j]
                    finite &= bool(np.isfinite(v[:, j]).all()) or name.endswith("acc")
        self.rows.append(pd.DataFrame(cols))
        if rec is not None:
            for k, l1, l2, l3 in rec.local:
                self.local_rows.append(pd.DataFrame({"round": t - 1, "pair": np.arange(R), "k": k,
                                                     "l1_a": l1[:, 0], "l1_b": l1[:, 1], "l2": l2, "l3": l3}))
        return finite

    def run(self, out: Path, progress: Optional[Callable] = None) -> dict:
        """Run all rounds, writing ``out``; return the summary."""
        cfg = self.cfg
        out = prepare_run_dir(out)
        atomic_write_json(out / "config.json", {**cfg.to_dict(), "hp_resolved": resolve_hp(cfg.algo, cfg.hp),
                                                "versions": versions(), "device_used": str(self.device),
                                                "d": self.model.d,
                                                "n_min": int(self.data.n_np[: self.task.num_train_clients].min())})
        start = time.perf_counter()
        status, diverged_round, t = "completed", None, self.t
        snapshot_rounds = {0, cfg.rounds // 2, cfg.rounds}
        snapshots = [self.engine.x[0, 0].clone()]
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            self._log_initial()
            while self.t < cfg.rounds:
                t = self.t + 1
                self.step()
                if not self.finite:
                    status, diverged_round = "diverged", t
                    break
                if t in snapshot_rounds:
                    snapshots.append(self.engine.x[0, 0].clone())
                if progress is not None:
                    progress(t)
                if t % FLUSH_EVERY == 0:
                    self._flush(out)
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            torch.use_deterministic_algorithms(previous)
        elapsed = time.perf_counter() - start
        df = self._flush(out)
        if cfg.constants:
            weights = self.evaluator.population_weights(0)  # trajectory A of pair 0: f = mean_i F_i
            atomic_write_json(out / "constants.json",
                              estimate_constants(cfg, self.model, self.data, weights, snapshots, df))
        summary = summarize(df, status=status, diverged_round=diverged_round, wall_s=elapsed,
                            rounds_done=t if status == "completed" else t - 1, out=str(out), nb=self.nb)
        atomic_write_json(out / "summary.json", summary)
        return summary

    def _flush(self, out: Path) -> pd.DataFrame:
        df = pd.concat(self.rows, ignore_index=True)
        atomic_write_csv(out / "metrics.csv", df)
        if self.local_rows:
            atomic_write_csv(out / "local.csv", pd.concat(self.local_rows, ignore_index=True))
        return df


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
             model=None) -> dict:
    """Build and run a paired experiment; write it to ``out`` (default ``runs/<algo>-<perturb>-<task>-<time>``).
    ``task`` and ``model`` as for :class:`PairedRun`."""
    run = PairedRun(cfg, task, model)
    cfg = run.cfg
    return run.run(Path(out) if out is not None else default_out_dir(cfg), progress)
