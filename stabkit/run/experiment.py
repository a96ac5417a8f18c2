"""``run_pair`` / ``resume_pair``: build everything a paired run needs, run it round by round, and write
the run directory.

Validation (config, task, model, algorithm hyperparameters, init file, output directory) all happens
before anything is written; a directory that already holds a run is refused unless ``overwrite``.
Metrics are appended every few rounds (``stabkit.run.metricslog``); every ``checkpoint_every`` rounds and
after the last one the whole state is checkpointed (``stabkit.run.checkpoint``), so a killed, interrupted
or finished run continues with ``resume_pair`` (also to more rounds) and writes the same bytes as an
uninterrupted run. A diverging run (NaN/inf) stops at the round it happened, and an interrupted one
(Ctrl-C) keeps everything logged so far. Time spent training, evaluating, checkpointing and estimating
constants is recorded in ``summary.json``.
"""
from __future__ import annotations

import dataclasses
import json
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
from stabkit.engine.paired import PairedEngine, RoundRecord
from stabkit.errors import ConfigError, require
from stabkit.engine.flatmodel import FlatModel
from stabkit.run.init import initial_parameters
from stabkit.engine.evaluation import TRAJ, Evaluator
from stabkit.models.registry import build_model
from stabkit.engine.perturbation import build_neighbours
from stabkit.run.checkpoint import load_checkpoint, save_checkpoint
from stabkit.run.evalbudget import plan_evaluation
from stabkit.run.metricslog import AppendLog
from stabkit.run.runstore import atomic_write_json, prepare_run_dir
from stabkit.run.saved_models import parse_save_spec, save_models
from stabkit.run.summary import summarize
from stabkit.tasks import build_task
from stabkit.tasks.base import Task

FLUSH_EVERY = 10  # rounds between atomic metric flushes


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


class PairedRun:
    """A fully built, validated paired experiment (nothing written yet)."""

    def __init__(self, cfg: RunConfig, task: Optional[Task] = None):
        """``task``: a ready-made :class:`Task` (Python API) instead of building ``cfg.task``. The evaluation
        schedule left open in ``cfg`` is chosen from the data size (``self.cfg`` holds the choice)."""
        self.algo = with_relaxed_init(build_algorithm(cfg.algo, cfg.hp), cfg.ri_beta, cfg.ri_aggregation)
        self.task = task if task is not None else build_task(cfg.task, cfg.task_options)
        model_name = cfg.model or self.task.default_model
        make_module = lambda: build_model(model_name, self.task, hidden=cfg.hidden)
        make_module()  # validates model/task compatibility before anything else happens
        require(cfg.augment == "none" or len(self.task.input_shape) == 3, "augment", cfg.augment,
                f"none for task {self.task.name!r}: crop_flip needs image inputs (C, H, W)")
        self.device = resolve_device(cfg.device)
        dtype = getattr(torch, cfg.dtype)
        self.nb = build_neighbours(self.task, cfg.perturb, cfg.client_mode, cfg.pairs, cfg.seed)
        self.data = FederatedData(self.task, self.nb.extra, dtype, self.device)
        self.eval_plan = self._plan_evaluation(cfg)
        self.cfg = cfg = cfg.replace(eval_every=self.eval_plan.every, eval_fraction=self.eval_plan.fraction)
        self.model = FlatModel(make_module(), self.task.kind, dtype, self.device)
        theta0 = initial_parameters(cfg.init, cfg.seed, cfg.pairs, make_module, self.model)
        self.engine = PairedEngine(cfg, self.algo, self.model, self.data, self.nb, theta0)
        self.evaluator = Evaluator(self.model, self.data, self.nb, cfg.eval_fraction, cfg.seed)
        self._full_evaluator = self.evaluator if cfg.eval_fraction >= 1 else None
        self.rows: list = []  # logged rows not yet appended to metrics.csv (all rows without a run directory)
        self.local_rows: list = []
        self.times = dict(train_s=0.0, eval_s=0.0, checkpoint_s=0.0, wall_s=0.0)
        self.t = 0  # rounds done
        self.finite = True  # False once the model or an evaluated loss is no longer finite
        self._initial_logged = False

    def step(self):
        """Run the next round (``self.t + 1``) and log it: one metrics row per pair (evaluated every
        ``eval_every`` rounds and at the last), local discrepancies at ``local_rounds``. The first call also
        logs the initial model as round 0. Returns the engine's :class:`~stabkit.engine.paired.RoundRecord`;
        ``self.finite`` says whether the state is still finite."""
        self._log_initial()
        t = self.t + 1
        start = time.perf_counter()
        rec = self.engine.step(t - 1, track_local=(t - 1) in self.cfg.local_rounds)
        self.times["train_s"] += time.perf_counter() - start
        self.finite = self._log(t, rec, self._evaluates(t))
        self.t = t
        return rec

    def _log_initial(self):
        if not self._initial_logged:
            self._log(0, None, evaluate=True)
            self._initial_logged = True

    def _plan_evaluation(self, cfg: RunConfig):
        data = self.data
        batch = float(np.mean(data.n_np[: self.task.num_train_clients])) if cfg.batch_size == "full" \
            else cfg.batch_size
        return plan_evaluation(len(data.flat_y), len(data.val_y), len(data.test_y),
                               cfg.sampled_clients * cfg.local_steps * batch, cfg.eval_every, cfg.eval_fraction)

    def describe_evaluation(self) -> str:
        """One line: the evaluation schedule of this run and how to ask for exact curves."""
        return self.eval_plan.describe(len(self.data.flat_y), len(self.data.test_y))

    def _evaluate(self, t: int, rec) -> dict:
        """Metrics of round t: on the evaluation subset, and on all data at the last round."""
        if t == self.cfg.rounds and self._full_evaluator is None:
            self._full_evaluator = Evaluator(self.model, self.data, self.nb, 1.0, self.cfg.seed)
        evaluator = self._full_evaluator if t == self.cfg.rounds else self.evaluator
        start = time.perf_counter()
        out = evaluator.evaluate(self.engine.x, None if rec is None else rec.rows)
        self.times["eval_s"] += time.perf_counter() - start
        return out

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
            for name, v in self._evaluate(t, rec).items():
                for j, tr in enumerate(TRAJ):
                    cols[f"{name}_{tr}"] = v[:, j]
                    finite &= bool(np.isfinite(v[:, j]).all()) or name.endswith("acc")
        self.rows.append(pd.DataFrame(cols))
        if rec is not None:
            for k, l1, l2, l3 in rec.local:
                self.local_rows.append(pd.DataFrame({"round": t - 1, "pair": np.arange(R), "k": k,
                                                     "l1_a": l1[:, 0], "l1_b": l1[:, 1], "l2": l2, "l3": l3}))
        return finite

    def _evaluates(self, t: int) -> bool:
        return t % self.cfg.eval_every == 0 or t == self.cfg.rounds

    def run(self, out: Path, progress: Optional[Callable] = None, overwrite: bool = False) -> dict:
        """Run all rounds, writing ``out`` (refused if it holds a run, unless ``overwrite``); return the
        summary. ``progress(t, stats)`` is called after every round (stats: ``eval_share``)."""
        out = prepare_run_dir(out, overwrite)
        self._open(out)
        snapshots = {0: self.engine.x[0, 0].clone()}
        self._log_initial()
        if 0 in self._save_rounds:
            self._save_models(out, 0)
        return self._run_rounds(out, 1, snapshots, progress)

    def resume(self, out: Path, progress: Optional[Callable] = None) -> dict:
        """Continue the run in ``out`` from its checkpoint up to ``self.cfg.rounds``; return the summary."""
        out = Path(out)
        ck = load_checkpoint(out, self.device)
        t = ck["round"]
        require(t <= self.cfg.rounds, "rounds", self.cfg.rounds,
                f"at least {t}: the checkpoint of {str(out)!r} is at round {t}")
        eng = self.engine
        eng.x, eng.server, eng.client_state = ck["x"], ck["server"], ck["client_state"]
        self.t, self._initial_logged = t, True
        self.times.update(ck["times"])
        self._open(out)
        rec = RoundRecord(**ck["record"])
        if t in (ck["rounds"], self.cfg.rounds):  # its row changes (all-data evaluation at the last round)
            self.metrics.truncate(ck["metrics_rows"])
            self.local.truncate(ck["local_rows"])
            self._log(t, rec, self._evaluates(t))
        else:  # round t's rows are logged as an uninterrupted run logs them: keep them
            self.metrics.truncate(ck["metrics_rows"] + self.cfg.pairs)
            self.local.truncate(ck["local_rows"] + len(rec.local) * self.cfg.pairs)
        return self._run_rounds(out, t + 1, dict(ck["snapshots"]), progress, last_rec=rec)

    def _open(self, out: Path) -> None:
        """config.json (with the chosen evaluation schedule) and the metric logs of ``out``."""
        cfg = self.cfg
        atomic_write_json(out / "config.json", {**cfg.to_dict(), "hp_resolved": resolve_hp(cfg.algo, cfg.hp),
                                                "versions": versions(), "device_used": str(self.device),
                                                "d": self.model.d,
                                                "n_min": int(self.data.n_np[: self.task.num_train_clients].min())})
        self.metrics, self.local = AppendLog(out / "metrics.csv"), AppendLog(out / "local.csv")
        rounds = self.cfg.rounds
        self._save_rounds = {t for t in range(rounds + 1) if parse_save_spec(self.cfg.save_models, rounds)(t)}

    def _run_rounds(self, out: Path, first: int, snapshots: dict, progress, last_rec=None) -> dict:
        cfg, eng = self.cfg, self.engine
        status, diverged_round, done, rec = "completed", None, first - 1, last_rec
        snapshot_rounds = {0, cfg.rounds // 2, cfg.rounds}
        session_start = time.perf_counter()
        wall_before = self.times["wall_s"]
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        in_round = False
        try:
            while self.t < cfg.rounds:
                in_round, t = True, self.t + 1
                rec = self.step()
                if not self.finite:
                    status, diverged_round = "diverged", t
                    break
                done = t
                if t in snapshot_rounds:
                    snapshots[t] = eng.x[0, 0].clone()
                self.times["wall_s"] = wall_before + time.perf_counter() - session_start
                if t in self._save_rounds:
                    self._save_models(out, t)
                if cfg.checkpoint_every and (t % cfg.checkpoint_every == 0 or t == cfg.rounds):
                    self._checkpoint(out, t, rec, snapshots)
                elif t % FLUSH_EVERY == 0:
                    self._flush()
                in_round = False  # from here to the next round's start the state is consistent and saved
                if progress is not None:
                    progress(t, {"eval_share": self.times["eval_s"] / max(self.times["wall_s"], 1e-9)})
        except KeyboardInterrupt:
            status = "interrupted"
            if not in_round and cfg.checkpoint_every and done >= first:  # a consistent state: keep it
                self._checkpoint(out, done, rec, snapshots)
        finally:
            torch.use_deterministic_algorithms(previous)
        self.times["wall_s"] = wall_before + time.perf_counter() - session_start
        self._flush()
        return self._finish(out, status, diverged_round, done, snapshots)

    def _finish(self, out: Path, status: str, diverged_round, done: int, snapshots: dict) -> dict:
        from stabkit.run.runstore import load_run
        df = load_run(out)
        times = {**self.times, "constants_s": 0.0}
        if self.cfg.constants:
            start = time.perf_counter()
            rounds = sorted(snapshots)
            weights = self.evaluator.population_weights(0)  # trajectory A of pair 0: f = mean_i F_i
            constants = estimate_constants(self.cfg, self.model, self.data, weights, [snapshots[r] for r in rounds], df)
            times["constants_s"] = time.perf_counter() - start
            atomic_write_json(out / "constants.json", {**constants, "snapshot_rounds": rounds})
        summary = summarize(df, status=status, diverged_round=diverged_round, wall_s=times["wall_s"],
                            rounds_done=done, out=str(out), nb=self.nb)
        total = times["wall_s"] + times["constants_s"]
        summary["time"] = {**times, "total_s": total, "eval_share": times["eval_s"] / total if total else 0.0,
                           "constants_share": times["constants_s"] / total if total else 0.0}
        summary["evaluation"] = self.describe_evaluation()
        atomic_write_json(out / "summary.json", summary)
        return summary

    def _flush(self) -> None:
        rows, local, self.rows, self.local_rows = self.rows, self.local_rows, [], []
        self.metrics.append(rows)
        self.local.append(local)

    def _save_models(self, out: Path, t: int) -> None:
        start = time.perf_counter()
        save_models(out, t, self.engine.x, self.model.names, self.model.shapes)
        self.times["checkpoint_s"] += time.perf_counter() - start

    def _checkpoint(self, out: Path, t: int, rec, snapshots: dict) -> None:
        """Flush the logs and save the state after round t (with the log positions before round t)."""
        start = time.perf_counter()
        self._flush()
        eng, local_t = self.engine, len(rec.local) if rec is not None else 0
        save_checkpoint(out, {
            "round": t, "rounds": self.cfg.rounds, "x": eng.x, "server": eng.server, "client_state": eng.client_state,
            "record": dataclasses.asdict(rec), "snapshots": snapshots,
            "metrics_rows": self.metrics.rows - self.cfg.pairs, "local_rows": self.local.rows - local_t * self.cfg.pairs,
            "times": dict(self.times)})
        self.times["checkpoint_s"] += time.perf_counter() - start


def versions() -> dict:
    return {"stabkit": __version__, "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def run_pair(cfg: RunConfig, out=None, progress: Optional[Callable] = None, task: Optional[Task] = None,
             overwrite: bool = False) -> dict:
    """Build and run a paired experiment; write it to ``out`` (default ``runs/<algo>-<perturb>-<task>-<time>``;
    a directory that holds a run is refused unless ``overwrite``)."""
    run = PairedRun(cfg, task)
    return run.run(Path(out) if out is not None else default_out_dir(cfg), progress, overwrite)


def resume_config(out, rounds: Optional[int] = None, **changes) -> RunConfig:
    """The config of the run in ``out`` (its ``config.json``), with ``rounds`` and output ``changes``
    (``checkpoint_every``, ``save_models``) applied."""
    path = Path(out) / "config.json"
    if not path.is_file():
        raise ConfigError(f"invalid resume={str(out)!r}: expected a run directory containing config.json")
    cfg = RunConfig.from_dict(json.loads(path.read_text()))
    return cfg.replace(**({"rounds": rounds} if rounds is not None else {}), **changes)


def resume_pair(out, rounds: Optional[int] = None, progress: Optional[Callable] = None,
                task: Optional[Task] = None, **changes) -> dict:
    """Continue the run in ``out`` from its checkpoint (to ``rounds`` if given, else its own)."""
    return PairedRun(resume_config(out, rounds, **changes), task).resume(Path(out), progress)
