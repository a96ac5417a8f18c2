"""Sharpness of a run's saved global models (``stabkit sharpness``), the same measures and table as
``--sharpness-rounds`` (:mod:`stabkit.flatness.runlog`) but after the run."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from stabkit.errors import ConfigError
from stabkit.flatness.landscape import saved_models_of
from stabkit.flatness.measure import measure
from stabkit.flatness.objective import check_fraction, training_objective
from stabkit.flatness.runlog import objective_note
from stabkit.flatness.settings import SavedRun, SharpnessSettings
from stabkit.store.atomic import atomic_write_csv, atomic_write_json
from stabkit.store.outdir import prepare_dir
from stabkit.trajectories import TRAJ

RADIUS_LIMIT = 10.0  # radii above this many times max(1, ||x||) measure the loss far outside the model's basin


def check_radii(radii: tuple, x) -> None:
    """Refuse radii beyond ``RADIUS_LIMIT`` x max(1, largest model norm): the SAM ball and the sphere of the
    average sharpness would then probe losses at parameters dominated by the perturbation itself."""
    limit = RADIUS_LIMIT * max(1.0, float(x.reshape(-1, x.shape[-1]).norm(dim=1).max()))
    big = [r for r in radii if r > limit]
    if big:
        raise ConfigError(f"invalid radius={big[0]:g}: radii in (0, {limit:.4g}] ({RADIUS_LIMIT:g} x the largest "
                          "saved model's norm, at least 1); a larger ball measures the perturbation, not the model")


def measure_saved(run: SavedRun, settings: SharpnessSettings, build: Callable, out: Path | None = None) -> tuple:
    """Measure every saved model of ``run``'s round (:func:`~stabkit.flatness.settings.open_saved`); return
    (table, csv path). ``build(cfg)``: a fresh engine of the run (``stabkit.run.experiment.rebuilt_engine``)."""
    cfg, T = run.cfg, run.round
    x, engine = saved_models_of(run, build)
    check_radii(settings.radii, x)
    check_fraction(settings.fraction, engine.data)
    R, _, d = x.shape
    obj = training_objective(engine.model, engine.data, engine.nb, cfg.seed, settings.fraction)
    cols = measure(obj, x.reshape(2 * R, d), settings)
    df = pd.DataFrame({"round": T, "pair": np.repeat(np.arange(R), 2), "traj": np.tile(TRAJ, R),
                       **{k: np.asarray(v) for k, v in cols.items()}})
    path = prepare_dir(Path(out) if out else run.path) / f"sharpness_round_{T}.csv"
    atomic_write_csv(path, df)
    atomic_write_json(path.with_suffix(".json"), {"settings": settings.to_dict(), "objective":
                                                  objective_note(settings.fraction), "samples": int(len(obj.x))})
    return df, path
