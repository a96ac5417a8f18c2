"""Per-algorithm tuning of the atlas: ``--tune lr=GRID`` (or ``global_lr``, or ``hp.NAME``), and a second
hyperparameter tuned jointly with the rate where it decides the comparison (``--tune lr,hp``).

Comparing algorithms at one shared learning rate favours whichever the rate suits: heavy-ball momentum
multiplies the effective step by about 1/(1 - beta), and a larger step moves trajectories apart faster.
With a grid, every (task, perturbation, algorithm) row of the suite runs at every point of its grid (the
*grid pass*, the suite's first seed, no top-up: one resumable sweep, ``OUT/sweep``). An algorithm's grid
is the product of its **axes**: the tuned key (every algorithm) and, for the algorithms a further axis
applies to, that hyperparameter (``beta=0.8,0.9,0.95``: every algorithm that has ``beta``;
``fedcm.alpha=...``: FedCM alone; ``hp``: the suite's table :data:`SECOND`, momentum for the heavy-ball
family and the proximal weight for FedProx and FedDyn). A product, not a coordinate search: the rate and
the momentum act together through the effective step lr / (1 - beta), so the best rate at one beta is not
the best at another.

Per algorithm and task the point with the best **validation** score at T is chosen: the accuracy of
trajectory A on the held-out samples of the task's training clients (``val_acc``; regression: the lowest
``val_loss``), pooled over the perturbations; trajectory A never trains on those samples, and the test
split takes no part in the choice. Ties go to the smaller point; a diverged job scores -inf. A choice on a
grid's edge is extended beyond it (:mod:`stabkit.atlas.extend`) before the cells at the chosen points are
topped up (:mod:`stabkit.atlas.topup`); the cells at the suite's shared value form the equal-rate view.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from stabkit.errors import ConfigError, require
from stabkit.keyvalue import scalar

TUNABLE = ("lr", "global_lr")  # run config fields a grid may vary; any hp.NAME too
HP = "hp."
# The suites' default grids (``--tune lr`` without values); each holds the suite's shared rate, so the
# equal-rate view is one of its points.
DEFAULT_GRIDS = {"small": {"lr": (0.0125, 0.025, 0.05, 0.1, 0.2)}, "ci": {"lr": (0.02, 0.05, 0.15)}}
# ``--tune lr,hp``: the second hyperparameter of the algorithms where it decides the comparison, three
# values around its default (in the middle): the heavy-ball coefficient on the 1 - beta scale (0.2, 0.1,
# 0.05), FedCM's weight of the fresh gradient (= 1 - beta) and MimeLite's momentum on their own scale, the
# proximal weight of FedProx and FedDyn by decades.
MOMENTUM = (0.8, 0.9, 0.95)
SECOND = {"fedavgm": ("beta", MOMENTUM), "fosm": ("beta", MOMENTUM), "fedsagd": ("beta", MOMENTUM),
          "fedacg": ("lam", MOMENTUM), "fedcm": ("alpha", (0.05, 0.1, 0.2)), "mimelite": ("beta", (0.1, 0.2, 0.4)),
          "fedprox": ("lam", (0.001, 0.01, 0.1)), "feddyn": ("lam", (0.001, 0.01, 0.1))}


@dataclass(frozen=True)
class Axis:
    """One tuned key (``lr``, ``global_lr`` or ``hp.NAME``), its grid (ascending) and the algorithms it
    applies to (None: every one)."""

    key: str
    grid: tuple
    algos: tuple | None = None

    def applies(self, algo: str) -> bool:
        return self.algos is None or algo in self.algos

    def to_dict(self) -> dict:
        return {"key": self.key, "grid": list(self.grid), "algos": None if self.algos is None else list(self.algos)}


@dataclass(frozen=True)
class Tune:
    """The tuned key and its grid (every algorithm), and the further axes (``extra``) tuned jointly with it."""

    key: str
    grid: tuple
    extra: tuple = ()

    def axes(self, algo: str) -> tuple:
        """The algorithm's axes: the tuned key first, then each further axis that applies to it."""
        return (Axis(self.key, self.grid), *(a for a in self.extra if a.applies(algo)))

    def keys(self) -> list:
        """Every tuned key, once, the tuned key first."""
        return list(dict.fromkeys([self.key, *(a.key for a in self.extra)]))

    def to_dict(self) -> dict:
        return {"key": self.key, "grid": list(self.grid), "extra": [a.to_dict() for a in self.extra]}

    @classmethod
    def from_dict(cls, d: dict) -> "Tune":
        extra = tuple(Axis(a["key"], tuple(a["grid"]), None if a["algos"] is None else tuple(a["algos"]))
                      for a in d.get("extra") or ())
        return cls(d["key"], tuple(d["grid"]), extra)


def parse_tune(text: str | None, suite_name: str) -> Tune | None:
    """``lr=0.01,0.03,0.1`` -> Tune; ``lr`` alone: the suite's default grid; then further axes, each
    ``NAME=V1,V2`` (every algorithm with hyperparameter NAME), ``ALGO.NAME=...`` (one algorithm) or ``hp``
    (the suite's :data:`SECOND` table); None: no tuning. One line naming the bad part otherwise."""
    if text is None:
        return None
    parts = _split_keys(text)
    key, values = parts[0]
    require(key in TUNABLE or (key.startswith(HP) and len(key) > len(HP)), "tune", key,
            f"one of {', '.join(TUNABLE)} or hp.NAME, as KEY=V1,V2,...")
    if values is None:
        grid = DEFAULT_GRIDS.get(suite_name, {}).get(key)
        require(grid is not None, "tune", text, f"a grid (KEY=V1,V2,...): suite {suite_name!r} has no default "
                f"grid for {key}")
        values = grid
    extra = []
    for name, grid in parts[1:]:
        if name == "hp" and grid is None:
            extra.append(Axis("hp", ()))  # the suite's table, expanded for the measured algorithms by bind()
            continue
        require(grid is not None and name not in TUNABLE, "tune", name, "a further axis NAME=V1,V2,... (an "
                "algorithm hyperparameter, or ALGO.NAME=... for one algorithm), or hp (the default table)")
        algo, _, hp_name = name.rpartition(".")
        extra.append(Axis(HP + hp_name, grid, None if algo in ("", "hp") else (algo,)))
    return Tune(key, tuple(values), tuple(extra))


def _split_keys(text: str) -> list:
    """``lr=0.1,0.2,beta=0.8,0.9`` -> [("lr", (0.1, 0.2)), ("beta", (0.8, 0.9))]; a key without values: None."""
    parts, current = [], None
    for raw in text.split(","):
        part = raw.strip()
        name, eq, value = part.partition("=")
        if eq or current is None or part == "hp":  # a new key (bare: its default grid, or the default table)
            current = [name.strip(), [] if eq else None]
            parts.append(current)
            part = value.strip() if eq else None
        if part is None:
            continue
        require(current[1] is not None, "tune", part, "a further axis NAME=V1,V2,... (an algorithm hyperparameter, "
                "or ALGO.NAME=... for one algorithm), or hp (the default table), after a key without values")
        v = scalar(part)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        require(ok, "tune", f"{current[0]}={part}", "grid values must be finite numbers > 0")
        current[1].append(float(v))
    for name, grid in parts:
        require(grid is None or len(set(grid)) == len(grid) > 0, "tune", text, "each grid value once")
    return [(name, None if grid is None else tuple(sorted(grid))) for name, grid in parts]


def bind(tune: Tune, algos: list) -> Tune:
    """``tune`` for the algorithms ``algos`` of this atlas: the tuned key checked on every one (a hyperparameter
    grid needs every algorithm to have it), ``hp`` expanded to the :data:`SECOND` entries of those measured, each
    further axis restricted to the algorithms that have its hyperparameter (an axis none of them has, or one
    hyperparameter tuned twice for an algorithm, refused in one line)."""
    if tune.key.startswith(HP):
        for algo in algos:
            require(_has(algo, tune.key), "tune", tune.key, f"algorithm {algo} has no hyperparameter "
                    f"{tune.key[len(HP):]!r} (leave it out of --algos, or tune lr / global_lr)")
    extra = []
    for axis in tune.extra:
        if axis.key == "hp":
            extra += [Axis(HP + SECOND[a][0], SECOND[a][1], (a,)) for a in algos if a in SECOND]
            continue
        hits = tuple(a for a in algos if axis.applies(a) and _has(a, axis.key))
        name = axis.key[len(HP):] if axis.algos is None else f"{axis.algos[0]}.{axis.key[len(HP):]}"
        require(bool(hits), "tune", name, f"a hyperparameter of an algorithm of this atlas ({', '.join(algos)})")
        extra.append(Axis(axis.key, axis.grid, hits))
    for algo in algos:
        keys = [a.key for a in extra if a.applies(algo)]
        require(len(set(keys)) == len(keys) and tune.key not in keys, "tune", algo,
                "each hyperparameter of an algorithm tuned once")
    return Tune(tune.key, tune.grid, tuple(extra))


def _has(algo: str, key: str) -> bool:
    try:
        return key[len(HP):] in hp_defaults(algo)
    except ConfigError:
        return False


def hp_defaults(algo: str) -> dict:
    """The algorithm's hyperparameters at their defaults (a variant's fixed values included)."""
    from stabkit.algorithms import resolve_hp

    return resolve_hp(algo, {})


def points(tune: Tune, algo: str) -> list:
    """Every point of the algorithm's grid (dicts key -> value), the product of its axes."""
    axes = tune.axes(algo)
    return [dict(zip((a.key for a in axes), values)) for values in itertools.product(*(a.grid for a in axes))]


def rows_spec(name: str, spec: dict, rows: list, tune: Tune, seeds: tuple) -> dict:
    """A sweep spec of ``rows`` (suite rows, each with its tuned point filled in) on ``seeds``: the suite's
    zipped keys and every tuned key zipped (null where a key does not apply), the rest in the base."""
    keys = tune.keys()
    base = {k: v for k, v in spec["base"].items() if k not in keys}
    cols = [k for k in spec["zip"] if k not in keys] + keys
    return {"name": name, "base": base, "zip": {c: [r.get(c) for r in rows] for c in cols},
            "product": {"seed": list(seeds)}}


def grid_spec(spec: dict, tune: Tune, seeds: tuple) -> dict:
    """The grid pass: every row of ``spec`` (a suite's sweep spec) at every point of its algorithm's grid, on
    ``seeds``; the tuned keys leave the base and the zipped rows (a preset's per-algorithm value included)."""
    rows = [{**row, **point} for row in spec_rows(spec) for point in points(tune, row["algo"])]
    return rows_spec(f"{spec['name']}-tuned", spec, rows, tune, seeds)


def tuned_spec(spec: dict, tune: Tune, chosen: dict, seeds: tuple) -> dict:
    """``spec`` at the chosen points (``(task, algo) -> point``): the tuned keys zipped axes, so the top-up
    (``stabkit.atlas.topup.topup_spec``) gives each cell pairs at its own chosen point."""
    rows = [{**row, **chosen[(row["task"], row["algo"])]} for row in spec_rows(spec)]
    return rows_spec(spec["name"], spec, rows, tune, seeds)


def spec_rows(spec: dict) -> list:
    """The zipped rows of a suite's sweep spec, each with the base values filled in."""
    zipped, base = spec["zip"], spec["base"]
    if not zipped:  # a suite of one algorithm on one task: everything in the base
        return [dict(base)]
    return [{**base, **dict(zip(zipped, values))} for values in zip(*zipped.values())]


def shared_values(spec: dict, tune: Tune) -> dict:
    """``(task, algo) -> point`` of the untuned suite (the equal-rate view's): the suite's value of the tuned
    key, each further axis at the algorithm's default."""
    out = {}
    for r in spec_rows(spec):
        point = {tune.key: r.get(tune.key)}
        for axis in tune.axes(r["algo"])[1:]:
            point[axis.key] = r.get(axis.key, hp_defaults(r["algo"]).get(axis.key[len(HP):]))
        out[(r["task"], r["algo"])] = point
    return out


def validation_score(job) -> float:
    """The job's score at T: trajectory A's validation accuracy (regression: minus its validation loss);
    -inf for a job that failed, diverged or has no validation metrics."""
    if job.curves is None or job.diverged_round is not None:
        return -math.inf
    acc, loss = job.validation.get("acc", math.nan), job.validation.get("loss", math.nan)
    score = acc if math.isfinite(acc) else -loss
    return score if math.isfinite(score) else -math.inf


def point_of(params: dict, tune: Tune, algo: str) -> tuple:
    """The job's point on its algorithm's axes, as a tuple of values in axis order."""
    return tuple(params.get(a.key) for a in tune.axes(algo))


def point_scores(jobs: list, tune: Tune) -> dict:
    """``(task, algo) -> {point tuple: mean validation score}`` over the jobs (perturbations x seeds); a point
    with any diverged or failed job scores -inf."""
    scores: dict = {}
    for job in jobs:
        p = job.params
        scores.setdefault((p["task"], p["algo"]), {}).setdefault(point_of(p, tune, p["algo"]), []).append(
            validation_score(job))
    return {cell: {pt: float(np.mean(s)) if all(math.isfinite(x) for x in s) else -math.inf
                   for pt, s in by_point.items()} for cell, by_point in scores.items()}


def best_point(by_point: dict, axes: tuple = ()) -> tuple:
    """The point with the best score; ties toward the point with fewer values outside their ``axes``' grids
    (an extension beyond a grid's edge is chosen only where it scores better: on a flat stretch -- a proximal
    weight shrinking toward 0 -- the choice stays inside the grid), then toward the smaller point."""
    def outside(pt):
        return sum(v is not None and not (min(a.grid) <= v <= max(a.grid)) for v, a in zip(pt, axes))

    best, best_score = None, -math.inf
    for pt in sorted(by_point, key=lambda pt: (outside(pt), pt)):
        if best is None or by_point[pt] > best_score:
            best, best_score = pt, by_point[pt]
    return best


def choose(jobs: list, tune: Tune) -> dict:
    """``(task, algo) -> chosen point`` (key -> value): the point with the best mean validation score over the
    jobs of the grid pass and its extensions, ties toward the smaller."""
    return chosen_points(point_scores(jobs, tune), tune)


def chosen_points(scores: dict, tune: Tune) -> dict:
    """:func:`choose` from :func:`point_scores` already computed."""
    return {(task, algo): dict(zip([a.key for a in tune.axes(algo)], best_point(by_point, tune.axes(algo))))
            for (task, algo), by_point in scores.items()}


def at_chosen(cells, chosen: dict):
    """The cells (a cell table with ``param.<key>`` columns) at the point chosen for their (task, algorithm)."""
    keep = []
    for i in range(len(cells)):
        row = cells.iloc[i]
        point = chosen.get((row["task"], row["algo"]))
        keep.append(point is not None and all(row.get(f"param.{k}") == v for k, v in point.items()))
    return cells[keep]


def point_text(point: dict, key: str) -> str:
    """``0.1`` / ``0.1, beta 0.9``: the tuned key's value first, then the further axes by name."""
    return ", ".join([f"{point[key]:g}", *(f"{k[len(HP):]} {v:g}" for k, v in point.items() if k != key)])
