"""Sharpness of a run's saved global models (``stabkit sharpness``), the same measures and table as
``--sharpness-rounds`` (:mod:`stabkit.flatness.runlog`) but after the run."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from stabkit.flatness.landscape import saved_models_of
from stabkit.flatness.measure import SharpnessSettings, measure
from stabkit.flatness.objective import training_objective
from stabkit.flatness.runlog import objective_note
from stabkit.store.atomic import atomic_write_csv, atomic_write_json
from stabkit.store.outdir import prepare_dir
from stabkit.store.saved_models import TRAJ


def measure_saved(run_dir, round_, settings: SharpnessSettings, build: Callable, out: Path | None = None) -> tuple:
    """Measure every saved model of round ``round_`` (default: the last saved); return (table, csv path).
    ``build(cfg)``: a fresh engine of the run (``stabkit.run.experiment.rebuilt_engine``)."""
    cfg, T, x, engine = saved_models_of(run_dir, round_, build)
    R, _, d = x.shape
    obj = training_objective(engine.model, engine.data, engine.nb, cfg.seed, settings.fraction)
    cols = measure(obj, x.reshape(2 * R, d), settings)
    df = pd.DataFrame({"round": T, "pair": np.repeat(np.arange(R), 2), "traj": np.tile(TRAJ, R),
                       **{k: np.asarray(v) for k, v in cols.items()}})
    path = prepare_dir(Path(out) if out else Path(run_dir)) / f"sharpness_round_{T}.csv"
    atomic_write_csv(path, df)
    atomic_write_json(path.with_suffix(".json"), {"settings": settings.to_dict(), "objective":
                                                  objective_note(settings.fraction), "samples": int(len(obj.x))})
    return df, path
