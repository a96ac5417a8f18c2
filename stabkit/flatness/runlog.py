"""``--sharpness-rounds``: the sharpness of both trajectories' global models measured during a paired run.

At each chosen round t (after round t's server update; t = 0 is the shared start) every measure of
:mod:`stabkit.flatness.measure` is taken for the global model of every pair and trajectory on its own
training objective f = (1/M) sum_i F_i -- over the run's ``--eval-fraction`` subset of every client's
samples (all of them by default) -- and, for the claims about local flatness (claim F4 of
:mod:`stabkit.flatness.claims`), the
top Hessian eigenvalue of each of round t's clients at its final local model on its own data
(``local_lambda_max``, ``local_loss``: means over the round's clients). Rows go to ``RUN/sharpness.csv``
(one per round x pair x trajectory), the settings to ``RUN/sharpness.json``; both written atomically.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from stabkit.config.runconfig import RunConfig
from stabkit.engine.data import FederatedData
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.perturbation import Neighbours
from stabkit.flatness.measure import measure
from stabkit.flatness.objective import client_objective, training_objective
from stabkit.flatness.settings import SharpnessSettings
from stabkit.store.rundir import RunDir
from stabkit.trajectories import TRAJ


def objective_note(fraction: float) -> str:
    where = "all" if fraction >= 1 else f"a fixed fraction {fraction:g} (the same positions in both runs)"
    return (f"each trajectory's training objective f = (1/M) sum_i F_i (client-uniform weights) on {where} "
            "of every client's training samples")


class SharpnessRounds:
    """The round loop's callback (``stabkit.run.loop``) measuring the sharpness of the paired run ``run`` (its
    model, data, neighbours, config and threads) into its directory ``out``: round 0 when a run starts, each
    sharpness round after it; a resumed run continues the table of its checkpoint's rounds. The time goes to
    the run's ``sharpness_s``."""

    def __init__(self, run, out: Path):
        self.log = SharpnessLog(run.model, run.data, run.nb, run.cfg, threads=run.threads)
        self.out = Path(out)

    def on_run_start(self, run, state) -> None:
        if state.round:
            self.log.resume(self.out, state.round)
        else:
            self.on_round_end(run, state)

    def on_round_end(self, run, state) -> None:
        with state.timers.timed("sharpness_s"):
            self.log.after_round(state.round, run.engine.x, state.record if state.round else None, self.out)


class SharpnessLog:
    """Measures and writes sharpness at the run's ``sharpness_rounds``."""

    def __init__(self, model: FlatModel, data: FederatedData, nb: Neighbours, cfg: RunConfig,
                 settings: SharpnessSettings | None = None, threads: int | None = None):
        """The run's model, data and neighbours; ``cfg``: its configuration (sharpness rounds, evaluation
        fraction, seed); ``threads``: the run's thread count, measured once when it started."""
        self.model, self.data, self.nb, self.seed, self.threads = model, data, nb, cfg.seed, threads
        self.rounds = set(cfg.sharpness_rounds)
        self.settings = settings or SharpnessSettings(fraction=cfg.eval_fraction, seed=cfg.seed)
        self.objective = None
        self.frames = []

    def resume(self, out, t: int) -> None:
        """Continue the table of a resumed run: the rows measured up to round ``t`` (its checkpoint) are kept,
        later ones are measured again (without this the first new round would rewrite the file without them)."""
        df = RunDir(out).sharpness()
        if df is not None:
            self.frames = [df[df["round"] <= t]]

    def after_round(self, t: int, x: torch.Tensor, rec, out) -> None:
        """Measure the global models ``x [R, 2, d]`` after round t if it is a sharpness round (and they are
        finite); rewrite the files."""
        if t not in self.rounds or not bool(torch.isfinite(x).all()):
            return
        if self.objective is None:
            self.objective = training_objective(self.model, self.data, self.nb, self.seed, self.settings.fraction)
        R, _, d = x.shape
        cols = measure(self.objective, x.reshape(2 * R, d), self.settings, threads=self.threads)
        frame = pd.DataFrame({"round": t, "pair": np.repeat(np.arange(R), 2), "traj": np.tile(TRAJ, R),
                              **{k: np.asarray(v) for k, v in cols.items()}})
        if rec is not None and rec.clients is not None:
            frame = frame.assign(**self._local(rec))
        self.frames.append(frame)
        RunDir(out).write_sharpness(pd.concat(self.frames, ignore_index=True), {
            "settings": self.settings.to_dict(), "objective": objective_note(self.settings.fraction),
            "samples": int(len(self.objective.x)),
            "local": "top Hessian eigenvalue of F_i at each of the round's final local models, mean over clients"})

    def _local(self, rec) -> dict:
        clients = rec.clients  # [R, 2, s, d]
        R, _, s, d = clients.shape
        local = dataclasses.replace(self.settings, top=1)
        cols = measure(client_objective(self.model, self.data, rec.rows.reshape(-1)), clients.reshape(-1, d), local,
                       spectrum_only=True, threads=self.threads)
        return {"local_lambda_max": cols["lambda_max"].reshape(2 * R, s).mean(1),
                "local_loss": cols["loss"].reshape(2 * R, s).mean(1)}


SUMMARY_COLUMNS = ("loss", "lambda_max", "lambda_ratio", "trace", "sam_0.05", "avg_0.05", "local_lambda_max")


def final_sharpness(run_dir) -> dict:
    """Means over pairs and trajectories of the last measured round of ``RUN/sharpness.csv`` (``run_dir``: a
    path or a RunDir), as
    ``sharp_<measure>`` columns (with ``sharp_round``) and their standard errors over the models
    ``sharp_<measure>_se`` (NaN for one model); {} when the run measured none."""
    df = RunDir.of(run_dir).sharpness()
    if df is None:
        return {}
    last = df[df["round"] == df["round"].max()]
    cols = [c for c in last.columns if c in SUMMARY_COLUMNS or c.startswith("sam_")]
    n = len(last)  # standard errors of the means over the job's models (pairs x trajectories)
    se = {f"sharp_{c}_se": float(last[c].std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan") for c in cols}
    return {"sharp_round": int(last["round"].iloc[0]), **{f"sharp_{c}": float(last[c].mean()) for c in cols}, **se}
