"""Sharpness of a run's saved global models (``stabkit sharpness``), the same measures and table as
``--sharpness-rounds`` (:mod:`stabkit.flatness.runlog`) but after the run."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from stabkit.errors import ConfigError
from stabkit.flatness.landscape import chosen_round, load_run_config
from stabkit.flatness.measure import SharpnessSettings, measure
from stabkit.flatness.objective import training_objective
from stabkit.flatness.runlog import TRAJ, objective_note
from stabkit.run.runstore import atomic_write_csv, atomic_write_json
from stabkit.run.saved_models import load_flat


RADIUS_LIMIT = 10.0  # radii above this many times max(1, ||x||) measure the loss far outside the model's basin


def check_radii(radii: tuple, x) -> None:
    """Refuse radii beyond ``RADIUS_LIMIT`` x max(1, largest model norm): the SAM ball and the sphere of the
    average sharpness would then probe losses at parameters dominated by the perturbation itself."""
    limit = RADIUS_LIMIT * max(1.0, float(x.reshape(-1, x.shape[-1]).norm(dim=1).max()))
    big = [r for r in radii if r > limit]
    if big:
        raise ConfigError(f"invalid radius={big[0]:g}: radii in (0, {limit:.4g}] ({RADIUS_LIMIT:g} x the largest "
                          "saved model's norm, at least 1); a larger ball measures the perturbation, not the model")


def measure_saved(run_dir, round_, settings: SharpnessSettings, out: Path | None = None) -> tuple:
    """Measure every saved model of round ``round_`` (default: the last saved); return (table, csv path)."""
    from stabkit.run.experiment import PairedRun

    cfg = load_run_config(run_dir)
    T = chosen_round(run_dir, round_)
    run = PairedRun(cfg)
    x = load_flat(run_dir, T, run.model.names, run.model.shapes)  # one line for a bad or foreign file
    check_radii(settings.radii, x)
    R, _, d = x.shape
    obj = training_objective(run, settings.fraction)
    cols = measure(obj, x.to(dtype=run.model.dtype, device=run.device).reshape(2 * R, d), settings)
    df = pd.DataFrame({"round": T, "pair": np.repeat(np.arange(R), 2), "traj": np.tile(TRAJ, R),
                       **{k: np.asarray(v) for k, v in cols.items()}})
    out = Path(out) if out else Path(run_dir)
    path = out / f"sharpness_round_{T}.csv"
    atomic_write_csv(path, df)
    atomic_write_json(path.with_suffix(".json"), {"settings": settings.to_dict(), "objective":
                                                  objective_note(settings.fraction), "samples": int(len(obj.x))})
    return df, path
