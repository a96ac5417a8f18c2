"""Top-up to a target precision: more pairs for the cells whose 95% interval of D_T is too wide.

Sample perturbation acts only when the replaced sample is drawn, so D_T varies far more between pairs than
under client perturbation (coefficient of variation 0.6-1.2 against 0.02-0.3 in the small suite): a fixed
number of pairs either wastes time on the precise cells or leaves the others at +-30%. With ``--ci-target
0.1`` the atlas first runs the suite, then gives every ranked cell whose half-width exceeds 10% of its mean
the pairs its measured spread asks for: a half-width falls as 1/sqrt(units), so a cell at relative
half-width h with n units needs about n (h / target)^2 (times ``MARGIN``), at most ``max_units`` in all.
The extra units of a cell run as *one* job with a new seed and that many pairs (the engine batches pairs:
448 pairs of the quadratic in one job cost a fraction of fourteen 32-pair jobs, whose time is mostly per-job
set-up), evaluating the losses at rounds 0 and T only (what the cells read). The extra jobs are one more
resumable sweep (``OUT/topup``), derived from the main sweep's cells
alone, so re-running the same command resumes it; a cell pools every pair of every job (seeds and pairs are
replication, ``stabkit.atlas.cells.REPLICATES``) and the page reports the half-width reached.
"""
from __future__ import annotations

import math

import pandas as pd

from stabkit.errors import require

TOPUP = "topup"
MARGIN = 1.15  # the pilot's spread is itself an estimate: ask for a little more than it says


def check_target(target, max_units) -> None:
    """One-line errors for a target outside (0, 1) or a unit cap below 2."""
    if target is not None:
        require(isinstance(target, float) and 0 < target < 1, "ci_target", target,
                "a relative half-width between 0 and 1 (e.g. 0.1 for +-10% of the mean)")
    require(isinstance(max_units, int) and max_units >= 2, "max_units", max_units, "an integer >= 2")


def extra_units(cells: pd.DataFrame, target: float, max_units: int) -> dict:
    """``(task, perturb, algo) -> extra pairs`` for the ranked cells of ``cells`` (the main sweep's) whose
    relative half-width of D_T exceeds ``target``."""
    out = {}
    for _, c in cells[cells["status"] == "ok"].iterrows():
        rel, units = c["D_T.rel_hw"], int(c["units"])
        if rel > target and units < max_units:
            out[(c["task"], c["perturb"], c["algo"])] = min(max_units, math.ceil(units * (rel / target) ** 2 * MARGIN)) - units
    return out


def topup_spec(main: dict, extra: dict) -> dict | None:
    """The sweep spec of the extra jobs: per cell in ``extra``, the main spec's row with a new seed (after the
    main sweep's) and the extra pairs; every axis the main spec zips stays an axis, so the jobs pool into the
    same cells; None when no cell needs more."""
    if not extra:
        return None
    zipped, base = main["zip"], main["base"]
    seed = max(main["product"]["seed"]) + 1
    keys = list(dict.fromkeys([*zipped, "pairs", "seed"]))
    out = {k: [] for k in keys}
    for values in zip(*zipped.values()):
        row = dict(zip(zipped, values))
        full = {**base, **row}
        pairs = extra.get((full["task"], full["perturb"], full["algo"]))
        if pairs:
            for k in keys:
                out[k].append({"pairs": pairs, "seed": seed}.get(k, row.get(k)))
    top_base = {k: v for k, v in base.items() if k != "pairs"}
    if base.get("rounds"):  # losses at 0 and T only: what the cells read (evaluating 2 x hundreds of models
        top_base["eval_every"] = base["rounds"]  # every 10th round was most of a big top-up job's time)
    return {"name": f"{main['name']}-topup", "base": top_base, "zip": out}
