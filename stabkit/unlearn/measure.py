""":func:`unlearn`: one unlearning method on one finished ``--perturb remove-client`` run, judged per pair
against the exact coupled retrain x_T^B.

Before anything is built the run is checked (``check_unlearnable``): a ``remove-client`` run, completed,
with its final models saved and unchanged since (their SHA-256 in ``summary.json``), and stored client updates
where the method needs them; the method's name and hyperparameters and the floor's size are checked too.
Each pair's row: the distance to the retrain ``||x_u - x_T^B||`` and doing nothing's ``||x_T^A - x_T^B||``,
both in units of the retraining noise floor (``stabkit.unlearn.floor``) when ``floor_seeds`` is given,
accuracy and loss of x_u, x_T^B and x_T^A on the forgotten client's training data and on the test set, and the
client gradient steps x_u cost against the retrain's (T rounds of s clients' K local steps).
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Optional

import numpy as np

from stabkit.config.runconfig import resume_config
from stabkit.errors import ConfigError
from stabkit.run.loop import EngineRounds, run_rounds
from stabkit.store.rundir import RunDir
from stabkit.store.saved_models import model_path
from stabkit.store.updates import updates_path
from stabkit.trajectories import TRAJ
from stabkit.unlearn.floor import check_floor_seeds, retrain_floor
from stabkit.unlearn.methods import build_method


def check_unlearnable(run_dir, method_name: str, hp: Optional[dict] = None, floor_seeds: Optional[int] = None):
    """``(cfg, summary, method)`` of a run ``stabkit unlearn`` can work on, or one ConfigError line saying why
    not; reads JSON files and hashes the final models, builds nothing."""
    run_dir = Path(run_dir)
    cfg = resume_config(run_dir)
    where = f"invalid run={str(run_dir)!r}"
    if cfg.perturb != "remove-client":
        raise ConfigError(f"{where}: its perturbation is {cfg.perturb!r}; unlearning is measured on a --perturb "
                          "remove-client run, whose trajectory B is the exact retrain without the forgotten client")
    method = build_method(method_name, hp)
    summary = RunDir(run_dir).summary
    if summary is None:
        raise ConfigError(f"{where}: no {RunDir.SUMMARY} (the run did not finish); finish it with "
                          f"`stabkit pair --resume {run_dir}`")
    if summary.get("status") != "completed":
        raise ConfigError(f"{where}: the run {summary.get('status')} at round {summary.get('rounds_done')}; "
                          "unlearning needs a completed run")
    T = cfg.rounds
    hashes = summary.get("models_sha256") or {}
    if not model_path(run_dir, T, 0, "a").is_file() or not hashes:
        raise ConfigError(f"{where}: no saved final models (round {T}); rerun it with --save-models final")
    for r in range(cfg.pairs):
        for traj in TRAJ:
            path = model_path(run_dir, T, r, traj)
            key = f"{path.parent.name}/{path.name}"
            if not path.is_file():
                raise ConfigError(f"{where}: the saved model {path} is missing; rerun it with --save-models final")
            if hashlib.sha256(path.read_bytes()).hexdigest() != hashes.get(key):
                raise ConfigError(f"{where}: the saved model {path} was changed after the run (its SHA-256 "
                                  "differs from summary.json's); restore it or rerun the run")
    if method.needs_updates and not (cfg.store_updates and updates_path(run_dir, 1).is_file()):
        raise ConfigError(f"invalid method={method_name!r}: it needs the client updates the run stored, and "
                          f"{run_dir} has none; rerun it with `stabkit pair --store-updates`")
    if floor_seeds is not None:
        check_floor_seeds(floor_seeds, float(summary.get("time", {}).get("train_s", 0.0)))
    return cfg, summary, method


def unlearn(run_dir, method: str, hp: Optional[dict] = None, floor_seeds: Optional[int] = None, task=None,
            echo=None) -> dict:
    """Run ``method`` (a name, import path or entry point, with hyperparameters ``hp``) on the run in
    ``run_dir`` and return ``{"method", "hp", "run", "floor_seeds", "pairs": [one row per pair]}``. ``task``: the
    run's ready-made Task, for a run made from Python on one; ``echo``: where a line about the floor's cost
    goes."""
    from stabkit.run.experiment import PairedRun
    from stabkit.store.saved_models import load_flat
    from stabkit.unlearn.context import UnlearnContext

    cfg, summary, m = check_unlearnable(run_dir, method, hp, floor_seeds)
    run = PairedRun(cfg, task)
    model = run.model
    x = load_flat(run_dir, cfg.rounds, model.names, model.shapes).to(run.engine.x)
    ctx = UnlearnContext(run, run_dir, x[:, 0].clone())
    out = m.unlearn(ctx)
    x_u = out.x.to(x)
    if tuple(x_u.shape) != tuple(ctx.x_final.shape):
        raise ConfigError(f"invalid method={method!r}: returned models of shape {list(x_u.shape)}, expected "
                          f"{list(ctx.x_final.shape)} (pairs x parameters)")
    floor = None
    if floor_seeds:
        if echo:
            echo(f"floor: {floor_seeds} retrains of B with fresh seeds, about "
                 f"{floor_seeds * summary['time']['train_s']:.0f} s")
        floor = retrain_floor(ctx, x[:, 1], floor_seeds)
    rows = _rows(ctx, x_u, x[:, 0], x[:, 1], np.asarray(out.client_steps, dtype=float), floor, retrain_steps(ctx))
    return {"method": m.name, "hp": dataclasses.asdict(m.p), "run": str(run_dir),
            "floor_seeds": floor_seeds, "pairs": rows}


def retrain_steps(ctx) -> float:
    """Client gradient steps of the retrain: T rounds of s clients' K local steps, times the algorithm's
    gradient evaluations per local step (measured on one round of a fresh engine)."""
    rec = run_rounds(EngineRounds((ctx.engine(ctx.x0),), 1)).record
    return float(ctx.rounds * ctx.sampled * ctx.local_steps * rec.grad_evals)


def _scores(ctx, models, x, y) -> tuple:
    """``(accuracy, loss)`` ``[Q]`` of ``models [Q, d]`` on samples ``(x, y)``."""
    losses, correct = ctx.model.losses(models, x, y)
    return correct.mean(1).cpu().numpy(), losses.mean(1).cpu().numpy()


def _rows(ctx, x_u, x_a, x_b, steps, floor, retrain: float) -> list:
    """One report row per pair (see the module docstring)."""
    import torch  # on use: the checks above need no torch
    d_u = (x_u - x_b).norm(dim=-1).cpu().numpy()
    d_none = (x_a - x_b).norm(dim=-1).cpu().numpy()
    data = ctx.data
    test = _scores(ctx, torch.cat((x_u, x_b, x_a)), data.test_x, data.test_y)
    rows = []
    R = ctx.pairs
    for r in range(R):
        fx, fy = data.row(int(ctx.forgotten[r]))
        acc, loss = _scores(ctx, torch.cat((x_u[r:r + 1], x_b[r:r + 1], x_a[r:r + 1])), fx, fy)
        f = None if floor is None else float(floor[r])
        rows.append({
            "pair": r, "forgotten_client": int(ctx.forgotten[r]),
            "distance_to_retrain": float(d_u[r]), "distance_none": float(d_none[r]), "floor": f,
            "distance_in_floor_units": _ratio(d_u[r], f), "none_in_floor_units": _ratio(d_none[r], f),
            "forgotten_acc": float(acc[0]), "forgotten_acc_retrain": float(acc[1]), "forgotten_acc_none": float(acc[2]),
            "forgotten_loss": float(loss[0]), "forgotten_loss_retrain": float(loss[1]),
            "forgotten_loss_none": float(loss[2]),
            "test_acc": float(test[0][r]), "test_acc_retrain": float(test[0][R + r]),
            "test_acc_none": float(test[0][2 * R + r]),
            "test_loss": float(test[1][r]), "test_loss_retrain": float(test[1][R + r]),
            "test_loss_none": float(test[1][2 * R + r]),
            "client_steps": float(steps[r]), "retrain_client_steps": retrain})
    return rows


def _ratio(d, floor):
    """``d`` in floor units; None without a floor or where the retrains all coincide (a floor of 0)."""
    return float(d) / floor if floor else None
