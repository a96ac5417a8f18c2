"""Per-algorithm tuning of the atlas: ``--tune lr=GRID`` (or ``global_lr``, or ``hp.NAME``).

Comparing algorithms at one shared learning rate favours whichever the rate suits: heavy-ball momentum
multiplies the effective step by about 1/(1 - beta), and a larger step moves trajectories apart faster.
With a grid, every (task, perturbation, algorithm) row of the suite runs at every grid value (the *grid
pass*, the suite's first seed, no top-up: one resumable sweep, ``OUT/sweep``). Per algorithm and task the
value with the best **validation** score at T is chosen: the accuracy of trajectory A on the held-out
samples of the task's training clients (``val_acc``; regression: the lowest ``val_loss``), pooled over the
perturbations and seeds; trajectory A never trains on those samples, and the test split takes no part in
the choice. Ties go to the smaller value; a diverged job scores -inf. Only the grid pass chooses (the
top-up's extra pairs at a chosen value never change the choice, so a resumed atlas continues with the same
one). The cells at the chosen values are then topped up (``stabkit.atlas.topup``), the cells at the
suite's shared value form the equal-rate view.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stabkit.errors import require
from stabkit.keyvalue import scalar

TUNABLE = ("lr", "global_lr")  # run config fields a grid may vary; any hp.NAME too
# The suites' default grids (``--tune lr`` without values); each holds the suite's shared rate, so the
# equal-rate view is one of its points.
DEFAULT_GRIDS = {"small": {"lr": (0.0125, 0.025, 0.05, 0.1, 0.2)}, "ci": {"lr": (0.02, 0.05, 0.15)}}


@dataclass(frozen=True)
class Tune:
    """The tuned key (``lr``, ``global_lr`` or ``hp.NAME``) and its grid, ascending."""

    key: str
    grid: tuple

    def to_dict(self) -> dict:
        return {"key": self.key, "grid": list(self.grid)}


def parse_tune(text: str | None, suite_name: str) -> Tune | None:
    """``lr=0.01,0.03,0.1`` -> Tune; ``lr`` alone: the suite's default grid; None: no tuning. One line
    naming the bad part otherwise (an unknown key, a value <= 0 or not finite, a suite without a default)."""
    if text is None:
        return None
    key, _, values = text.partition("=")
    key = key.strip()
    require(key in TUNABLE or (key.startswith("hp.") and len(key) > 3), "tune", key,
            f"one of {', '.join(TUNABLE)} or hp.NAME, as KEY=V1,V2,...")
    if not values.strip():
        grid = DEFAULT_GRIDS.get(suite_name, {}).get(key)
        require(grid is not None, "tune", text, f"a grid (KEY=V1,V2,...): suite {suite_name!r} has no default "
                f"grid for {key}")
        return Tune(key, tuple(grid))
    grid = []
    for part in values.split(","):
        v = scalar(part.strip())
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        require(ok, "tune", f"{key}={part.strip()}", "grid values must be finite numbers > 0")
        grid.append(float(v))
    require(len(set(grid)) == len(grid), "tune", text, "each grid value once")
    return Tune(key, tuple(sorted(grid)))


def check_algos(tune: Tune, algos: list) -> None:
    """A hyperparameter grid needs every algorithm to have that hyperparameter (the first lacking it named)."""
    from stabkit.algorithms import build_algorithm
    from stabkit.errors import ConfigError

    if not tune.key.startswith("hp."):
        return
    name = tune.key[3:]
    for algo in algos:
        try:
            build_algorithm(algo, {name: tune.grid[0]})
        except ConfigError:
            raise ConfigError(f"invalid tune={tune.key!r}: algorithm {algo} has no hyperparameter {name!r} "
                              f"(leave it out of --algos, or tune lr / global_lr)") from None


def grid_spec(spec: dict, tune: Tune, seeds: tuple) -> dict:
    """The grid pass: ``spec`` (a suite's sweep spec) with the tuned key a product axis over the grid, on
    ``seeds``; the key leaves the base and the zipped rows (a preset's per-algorithm value included)."""
    base = {k: v for k, v in spec["base"].items() if k != tune.key}
    zipped = {k: v for k, v in spec["zip"].items() if k != tune.key}
    return {"name": f"{spec['name']}-tuned", "base": base, "zip": zipped,
            "product": {"seed": list(seeds), tune.key: list(tune.grid)}}


def tuned_spec(spec: dict, tune: Tune, chosen: dict, seeds: tuple) -> dict:
    """``spec`` at the chosen values (``(task, algo) -> value``): the tuned key one more zipped axis, so the
    top-up (``stabkit.atlas.topup.topup_spec``) gives each cell pairs at its own chosen value."""
    zipped = {k: v for k, v in spec["zip"].items() if k != tune.key}
    base = {k: v for k, v in spec["base"].items() if k != tune.key}
    zipped[tune.key] = [chosen[(r["task"], r["algo"])] for r in spec_rows(spec)]
    return {"name": spec["name"], "base": base, "zip": zipped, "product": {"seed": list(seeds)}}


def spec_rows(spec: dict) -> list:
    """The zipped rows of a suite's sweep spec, each with the base values filled in."""
    zipped, base = spec["zip"], spec["base"]
    return [{**base, **dict(zip(zipped, values))} for values in zip(*zipped.values())]


def shared_values(spec: dict, tune: Tune) -> dict:
    """``(task, algo) -> value`` of the tuned key in the untuned suite (the equal-rate view's value)."""
    return {(r["task"], r["algo"]): r.get(tune.key) for r in spec_rows(spec)}


def validation_score(job) -> float:
    """The job's score at T: trajectory A's validation accuracy (regression: minus its validation loss);
    -inf for a job that failed, diverged or has no validation metrics."""
    if job.curves is None or job.diverged_round is not None:
        return -math.inf
    acc, loss = job.validation.get("acc", math.nan), job.validation.get("loss", math.nan)
    score = acc if math.isfinite(acc) else -loss
    return score if math.isfinite(score) else -math.inf


def choose(jobs: list, tune: Tune) -> dict:
    """``(task, algo) -> chosen value``: the grid value with the best mean validation score over the jobs
    (perturbations x seeds) of the grid pass, ties toward the smaller value."""
    scores: dict = {}
    for job in jobs:
        p = job.params
        scores.setdefault((p["task"], p["algo"]), {}).setdefault(p[tune.key], []).append(validation_score(job))
    chosen = {}
    for cell, by_value in scores.items():
        best, best_score = None, -math.inf
        for value in sorted(by_value):
            s = float(np.mean(by_value[value])) if all(math.isfinite(x) for x in by_value[value]) else -math.inf
            if best is None or s > best_score:
                best, best_score = value, s
        chosen[cell] = best
    return chosen


def at_chosen(cells, key: str, chosen: dict):
    """The cells (a cell table with ``param.<key>``) at the value chosen for their (task, algorithm)."""
    keep = [chosen.get((t, a)) == v for t, a, v in zip(cells["task"], cells["algo"], cells[f"param.{key}"])]
    return cells[keep]
