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
from stabkit.run.outdir import prepare_dir
from stabkit.run.runstore import atomic_write_csv, atomic_write_json
from stabkit.run.saved_models import load_flat


def measure_saved(run_dir, round_, settings: SharpnessSettings, out: Path | None = None) -> tuple:
    """Measure every saved model of round ``round_`` (default: the last saved); return (table, csv path)."""
    from stabkit.run.experiment import PairedRun

    cfg = load_run_config(run_dir)
    T = chosen_round(run_dir, round_)
    x = load_flat(run_dir, T)
    run = PairedRun(cfg)
    if x.shape[-1] != run.model.d:
        raise ConfigError(f"invalid run={str(run_dir)!r}: saved models have {x.shape[-1]} parameters, "
                          f"the run's model {run.model.d}")
    R, _, d = x.shape
    obj = training_objective(run, settings.fraction)
    cols = measure(obj, x.to(dtype=run.model.dtype, device=run.device).reshape(2 * R, d), settings)
    df = pd.DataFrame({"round": T, "pair": np.repeat(np.arange(R), 2), "traj": np.tile(TRAJ, R),
                       **{k: np.asarray(v) for k, v in cols.items()}})
    path = prepare_dir(Path(out) if out else Path(run_dir)) / f"sharpness_round_{T}.csv"
    atomic_write_csv(path, df)
    atomic_write_json(path.with_suffix(".json"), {"settings": settings.to_dict(), "objective":
                                                  objective_note(settings.fraction), "samples": int(len(obj.x))})
    return df, path
