"""The page of a tuned atlas: the tuned view first (its summary, figures, ``cells.csv`` and ``summary.md``),
the equal-rate view as a second section (``summary_equal.md``), and the stability-accuracy figure over the
whole grid (``grid.csv`` beside it)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from stabkit.atlas.extend import LIMIT, choice_edges, summary
from stabkit.atlas.figures import draw_stability_accuracy
from stabkit.atlas.page import wide_markdown
from stabkit.atlas.suites import POLICY, Suite, suite_spec_dict
from stabkit.atlas.tuning import Tune, chosen_points, point_scores, shared_values
from stabkit.atlas.views import TUNED_COLUMNS, equal_view, grid_view, tuned_view
from stabkit.store.atomic import atomic_write_csv, atomic_write_json, atomic_write_text
from stabkit.store.outdir import FIGURES

TUNED_POLICY = ("Tuned view (first): every algorithm runs at every point of its grid on the suite's first seed "
                "(no top-up there); per algorithm and task the point with the best validation score at T is "
                "chosen -- trajectory A's accuracy on the held-out samples of the training clients (regression: "
                "the lowest validation loss), pooled over both perturbations; ties go to the smaller value; the "
                "test data take no part. A choice on a grid's edge is extended beyond it (the grid's ratio per "
                f"step, at most {LIMIT} values per side) until it is interior, the value beyond diverges or the "
                "limit is reached; only the cells at the chosen points are topped up. Everything else as in the "
                "equal-rate view: ")


def tuned_page(grid: pd.DataFrame, meta: dict, suite: Suite, grid_jobs: list, out: Path, titles: dict,
               extras) -> tuple:
    """``(tuned cells, extras, policy)`` for :func:`stabkit.atlas.page.write_page` from the cells of the
    whole grid and the grid pass's jobs (the choice is theirs alone)."""
    tune = Tune.from_dict(meta["tune"])
    scores = point_scores(grid_jobs, tune)
    chosen, edges = chosen_points(scores, tune), choice_edges(scores, tune)
    shared = shared_values(suite_spec_dict(suite, meta["algos"]), tune)
    tuned, equal = tuned_view(grid, tune, chosen, edges), equal_view(grid, tune, shared)
    every = grid_view(grid, tune, chosen)
    atomic_write_csv(out / "grid.csv", every.drop(columns=["curve", "job_dirs"], errors="ignore")
                     .assign(jobs=every["jobs"].map(";".join)))
    counts = summary(edges)
    atomic_write_json(out / "extensions.json", {**counts, "edges": [
        {"task": t, "algo": a, "key": e.key, "side": e.side, "chosen": e.chosen, "stop": e.stop, "at": e.at,
         "steps": e.steps} for (t, a), es in edges.items() for e in es]})
    figure = draw_stability_accuracy(every, tune, chosen, out / FIGURES, titles)
    if len(equal):
        atomic_write_text(out / "summary_equal.md", wide_markdown(equal, titles))
    values = sorted({p[tune.key] for p in shared.values() if p[tune.key] is not None})
    at = f"{tune.key} = {', '.join(f'{v:g}' for v in values)}"
    sections = [{"heading": f"Equal-rate view: every algorithm at the suite's shared {at}",
                 "note": "The same cells at one shared value, ranked among themselves: a larger effective step "
                         "(heavy-ball momentum multiplies it by about 1/(1 - β)) moves trajectories apart "
                         "faster, so this view favours the algorithms the shared value suits."
                         if len(equal) else f"The grid does not hold the shared value ({at}): no equal-rate view.",
                 "cells": equal, "prefix": "equal-"}]
    extras = dataclasses.replace(
        extras, columns=TUNED_COLUMNS, heading=f"Tuned view: every algorithm at its own {tune.key}",
        note="Each cell at the point its algorithm chose on this task (column 'tuned value'); 'D_T at matched acc' "
             "reads each algorithm's curve over the grid at the table's matched level. " + extension_text(counts),
        sections=sections,
        figures=[(figure, "Stability against accuracy across the grid", f"Per table, each algorithm's D_T (± 95% "
                  f"CI) against test accuracy (test loss for regression) at every {tune.key} of the grid; ringed: "
                  f"the tuned value; dashed: the matched level (the lowest best accuracy of the learning "
                  f"algorithms, low outliers left out).")])
    return tuned, extras, TUNED_POLICY + POLICY


def extension_text(counts: dict) -> str:
    """``12 of 72 choices sat on a grid's edge and were extended; stopped by: 9 worse, 3 diverged.``"""
    if not counts["extended"]:
        return f"No choice of the {counts['choices']} sat on its grid's edge."
    stops = ", ".join(f"{n} {why}" for why, n in sorted(counts["stops"].items(), key=lambda kv: -kv[1]))
    return (f"{counts['extended']} of {counts['choices']} choices sat on a grid's edge and were extended; what "
            f"stopped each extended side: {stops}.")


def redraw(data: Path, out: Path) -> list:
    """Draw a tuned atlas's stability-accuracy and privacy figures into ``out`` from its tables alone
    (``grid.csv``, ``cells.csv`` and ``atlas.json`` in ``data``, as the page writes them): how the committed
    figures are drawn and checked, without the thousand jobs behind them."""
    import json

    from stabkit.atlas.figures import draw_privacy
    from stabkit.atlas.suites import get_suite

    meta = json.loads((data / "atlas.json").read_text())
    tune = Tune.from_dict(meta["tune"])
    grid, cells = pd.read_csv(data / "grid.csv"), pd.read_csv(data / "cells.csv")
    chosen = {(t, a): {axis.key: row[f"param.{axis.key}"] for axis in tune.axes(a)}
              for (t, a), row in cells.drop_duplicates(["task", "algo"]).set_index(["task", "algo"]).iterrows()}
    titles = {t.name: t.title for t in get_suite(meta["suite"]).tasks}
    paths = [draw_stability_accuracy(grid, tune, chosen, out, titles)]
    if "epsilon" in cells and cells["epsilon"].notna().any():
        paths.append(draw_privacy(cells, out, titles))
    return paths
