"""Top-up to a target precision: more pairs for the cells whose 95% interval of D_T is too wide.

Sample perturbation acts only when the replaced sample is drawn, so D_T varies far more between pairs than
under client perturbation (coefficient of variation 0.6-1.2 against 0.02-0.3 in the small suite): a fixed
number of pairs either wastes time on the precise cells or leaves the others at +-30%. With ``--ci-target
0.1`` the atlas first runs the suite, then gives every ranked cell whose half-width exceeds 10% of its mean
the pairs its measured spread asks for: a half-width falls as 1/sqrt(units), so a cell at relative
half-width h with n units needs about n (h / target)^2 (times ``MARGIN``), at most ``max_units`` in all.
The extra units of a cell run as *one* job with a new seed and that many pairs (the engine batches pairs:
448 pairs of the quadratic in one job cost a fraction of fourteen 32-pair jobs, whose time is mostly per-job
set-up), evaluating the losses at rounds 0 and T only (what the cells read) and estimating no constants
(the cells take Ĝ and the bounds from the main sweep's jobs). The pilot's spread is itself an estimate,
so a cell can still be wider after its top-up: up to ``PASSES`` passes, each from the cells of every job
before it. Each pass is one more resumable sweep (``OUT/topup``, ``OUT/topup2``, ...) derived from the
finished jobs before it alone, so re-running the same command resumes it; its jobs run longest first (the
pairs a cell gets times its measured seconds per pair), so two workers end together. A cell pools every
pair of every job (seeds and pairs are replication, ``stabkit.atlas.cells.REPLICATES``) and the page
reports the half-width reached.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from stabkit.errors import require

if TYPE_CHECKING:  # annotations only: the atlas's refusals come before pandas is imported
    import pandas as pd

TOPUP = "topup"
PASSES = 3  # top-up passes at most
MARGIN = 1.15  # the pilot's spread is itself an estimate: ask for a little more than it says


def topup_dir(k: int) -> str:
    """The sweep directory of top-up pass ``k`` (1, 2, ...): ``topup``, ``topup2``, ..."""
    return TOPUP if k == 1 else f"{TOPUP}{k}"


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


def topup_spec(main: dict, extra: dict, k: int = 1, seconds_per_pair: dict | None = None) -> dict | None:
    """The sweep spec of pass ``k``'s extra jobs: per cell in ``extra``, the main spec's row with a new seed
    (the main sweep's last + k) and the extra pairs, longest first by ``seconds_per_pair`` (cell -> measured
    seconds); every axis the main spec zips stays an axis, so the jobs pool into the same cells; None when no
    cell needs more."""
    if not extra:
        return None
    zipped, base = main["zip"], main["base"]
    seed = max(main["product"]["seed"]) + k
    keys = list(dict.fromkeys([*zipped, "pairs", "seed"]))
    rows = []
    for values in zip(*zipped.values()):
        row = dict(zip(zipped, values))
        full = {**base, **row}
        cell = (full["task"], full["perturb"], full["algo"])
        if extra.get(cell):
            cost = extra[cell] * (seconds_per_pair or {}).get(cell, 0.0)
            rows.append((cost, {k: {"pairs": extra[cell], "seed": seed}.get(k, row.get(k)) for k in keys}))
    rows.sort(key=lambda r: -r[0])  # stable: the suite's order among equal costs
    out = {k: [r[k] for _, r in rows] for k in keys}
    top_base = {k: v for k, v in base.items() if k != "pairs"}
    top_base["constants"] = False  # the cells read Ĝ and the bounds from the main sweep's jobs
    if base.get("rounds"):  # losses at 0 and T only: what the cells read (evaluating 2 x hundreds of models
        top_base["eval_every"] = base["rounds"]  # every 10th round was most of a big top-up job's time)
    return {"name": f"{main['name']}-{topup_dir(k)}", "base": top_base, "zip": out}


def seconds_per_pair(manifests: list) -> dict:
    """``(task, perturb, algo) -> seconds per pair`` measured by the finished jobs of ``manifests``."""
    spent: dict = {}
    for m in manifests:
        for job in m.spec.jobs():
            rec, p = m.jobs[job.id], job.config
            if rec.get("wall_s"):
                cell = spent.setdefault((p["task"], p["perturb"], p["algo"]), [0.0, 0])
                cell[0] += rec["wall_s"]
                cell[1] += p["pairs"]
    return {cell: s / n for cell, (s, n) in spent.items()}
