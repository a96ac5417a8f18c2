"""Grids that reach the optimum: a tuned choice on a grid's edge is extended beyond it.

A choice on the edge of its grid is not a tuned choice: the best value may lie beyond. After the grid pass,
per (task, algorithm) and per axis of its grid (:mod:`stabkit.atlas.tuning`), where the chosen point sits on
the edge of the values tried along that axis (the other coordinates at their chosen values), the next value
beyond it is run: the grid's own ratio at that end (x2 / ÷2 for the small suite's rates), on the 1 - v scale
for a coefficient grid in [0.5, 1) (momentum: 0.95 -> 0.975). Then the choice is made again. It stops, per
side, when

* the choice is **interior**: the value beyond it was tried and scored lower ("``0.8 worse``") or diverged
  ("``0.8 diverged``": the rate beyond the largest stable one);
* **limit**: :data:`LIMIT` values beyond the grid's edge were tried on that side and the choice is still the
  outermost;
* **range end**: the next value is outside the hyperparameter's declared range (a momentum coefficient < 0).

The matched-accuracy view (:mod:`stabkit.atlas.matched`) is extended the same way: an algorithm whose curve
already reaches its table's level at the smallest rate tried gets smaller rates until it crosses the level
(its D_T there is interpolated, not an upper end) or the limit is reached. Each round of extensions is one
resumable sweep (``OUT/extend1``, ``OUT/extend2``, ...) derived from the finished jobs before it alone, on
the grid pass's seed and both perturbations (the choice pools them), at most :data:`ROUNDS` rounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from stabkit.atlas.tuning import HP, Axis, Tune, best_point, point_scores
from stabkit.errors import ConfigError

LIMIT = 4  # values tried beyond a grid's edge, per axis and side, at most
ROUNDS = 2 * LIMIT  # rounds of extensions at most (an axis's move can reopen another axis's edge)
EXTEND = "extend"


def extend_dir(k: int) -> str:
    """The sweep directory of extension round ``k`` (1, 2, ...)."""
    return f"{EXTEND}{k}"


@dataclass(frozen=True)
class Edge:
    """What one side of one axis of a (task, algorithm)'s choice came to: ``stop`` is ``worse`` / ``no better``
    (a tie: the choice stays inside the grid) / ``diverged``
    (at the value ``at`` beyond the choice), ``limit``, ``range end`` (``at``: the refused value) or
    ``pending`` (``at``: the value to run next); ``steps``: the values tried beyond the grid's edge."""

    key: str
    side: int
    chosen: float
    stop: str
    at: float
    steps: int

    def text(self) -> str:
        if self.stop in ("worse", "no better", "diverged"):
            return f"{self.at:g} {self.stop}"
        return "limit" if self.stop in ("limit", "pending") else f"range end ({self.at:g} refused)"


def step(axis: Axis, value: float, side: int) -> float:
    """The value beyond ``value`` on ``side`` (+1 up, -1 down): the grid's ratio at that end (2 for a grid of
    one value), on the 1 - v scale for a coefficient grid in [0.5, 1); six significant digits."""
    g = axis.grid
    complement = g[0] >= 0.5 and g[-1] < 1
    scale = (lambda v: 1 - v) if complement else (lambda v: v)
    if len(g) > 1:
        end, inner = (g[-1], g[-2]) if side > 0 else (g[0], g[1])
        ratio = scale(end) / scale(inner)
    else:
        ratio = 2.0 ** side
    nxt = 1 - (1 - value) * ratio if complement else value * ratio
    return float(f"{nxt:.6g}")


def allowed(algo: str, key: str, value: float) -> bool:
    """Whether the algorithm accepts ``key`` = ``value`` (a rate: finite and > 0; a hyperparameter: within its
    declared range)."""
    if not (math.isfinite(value) and value > 0):
        return False
    if not key.startswith(HP):
        return True
    from stabkit.algorithms import build_algorithm

    try:
        build_algorithm(algo, {key[len(HP):]: value})
        return True
    except ConfigError:
        return False


def cell_edges(by_point: dict, tune: Tune, algo: str, limit: int = LIMIT) -> list:
    """The :class:`Edge` of every side of every axis where the chosen point of ``by_point`` (point tuple ->
    score) sits on or beyond its grid's edge."""
    axes = tune.axes(algo)
    chosen = best_point(by_point, axes)
    out = []
    for i, axis in enumerate(axes):
        line = sorted(pt[i] for pt in by_point if pt[:i] + pt[i + 1:] == chosen[:i] + chosen[i + 1:])
        c = chosen[i]
        for side, edge in ((1, max(axis.grid)), (-1, min(axis.grid))):
            if (c - edge) * side < 0:
                continue
            steps = sum((v - edge) * side > 0 for v in line)
            beyond = [v for v in line if (v - c) * side > 0]
            if beyond:
                nb = min(beyond, key=lambda v: abs(v - c))
                score = by_point[chosen[:i] + (nb,) + chosen[i + 1:]]
                mine = by_point[chosen]
                stop = "diverged" if score == -math.inf else "worse" if score < mine else "no better"
                out.append(Edge(axis.key, side, c, stop, nb, steps))
            elif steps >= limit:
                out.append(Edge(axis.key, side, c, "limit", c, steps))
            else:
                nxt = step(axis, c, side)
                out.append(Edge(axis.key, side, c, "pending" if allowed(algo, axis.key, nxt) else "range end",
                                nxt, steps))
    return out


def choice_edges(scores: dict, tune: Tune) -> dict:
    """``(task, algo) -> [Edge]`` of every cell's choice (see :func:`cell_edges`), from
    :func:`~stabkit.atlas.tuning.point_scores`."""
    return {cell: cell_edges(by_point, tune, cell[1]) for cell, by_point in scores.items()}


def matched_pending(cells, tune: Tune, chosen: dict, limit: int = LIMIT) -> dict:
    """``(task, algo) -> smaller rate to run`` where an algorithm's curve (at its chosen other coordinates)
    reaches its table's matched level already at its smallest rate, fewer than ``limit`` rates below the
    grid's smallest were tried and the next one is allowed."""
    from stabkit.atlas.matched import matched_table

    axis = Axis(tune.key, tune.grid)
    out = {}
    table = matched_table(cells, tune.key, chosen)
    for _, row in table[table["upper"]].iterrows():
        line = row["line"]
        lowest = min(line)
        nxt = step(axis, lowest, -1)
        if sum(v < min(tune.grid) for v in line) < limit and allowed(row["algo"], tune.key, nxt):
            out.setdefault((row["task"], row["algo"]), min(nxt, out.get((row["task"], row["algo"]), nxt)))
    return out


def pending_points(jobs: list, cells, tune: Tune) -> list:
    """``[(task, algo, point)]`` to run next: each choice's pending edges, then each curve's matched-level
    extension (the point: the chosen one with one coordinate moved)."""
    from stabkit.atlas.tuning import chosen_points

    scores = point_scores(jobs, tune)
    chosen = chosen_points(scores, tune)
    out = []
    for (task, algo), edges in choice_edges(scores, tune).items():
        for e in edges:
            if e.stop == "pending":
                out.append((task, algo, {**chosen[(task, algo)], e.key: e.at}))
    for (task, algo), rate in matched_pending(cells, tune, chosen).items():
        point = {**chosen[(task, algo)], tune.key: rate}
        if (task, algo, point) not in out:
            out.append((task, algo, point))
    return out


def extension_rows(spec: dict, pending: list) -> list:
    """The suite rows of ``spec`` (both perturbations of each task) at each pending point."""
    from stabkit.atlas.tuning import spec_rows

    return [{**row, **point} for task, algo, point in pending for row in spec_rows(spec)
            if row["task"] == task and row["algo"] == algo]


def summary(edges: dict) -> dict:
    """Counts for the page and the closing line: (task, algorithm) choices, how many were extended (an edge
    side with a value tried beyond the grid), and what stopped each extended side."""
    stops: dict = {}
    extended = 0
    for cell_edges_ in edges.values():
        moved = [e for e in cell_edges_ if e.steps or e.stop in ("limit", "range end", "pending")]
        extended += bool(moved)
        for e in moved:
            label = {"pending": "limit"}.get(e.stop, e.stop)
            stops[label] = stops.get(label, 0) + 1
    return {"choices": len(edges), "extended": extended, "stops": stops}
