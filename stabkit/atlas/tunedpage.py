"""The page of a tuned atlas: the tuned view first (its summary, figures, ``cells.csv`` and ``summary.md``),
the equal-rate view as a second section (``summary_equal.md``), and the stability-accuracy figure over the
whole grid (``grid.csv`` beside it)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from stabkit.atlas.figures import draw_stability_accuracy
from stabkit.atlas.page import wide_markdown
from stabkit.atlas.suites import POLICY, Suite, suite_spec_dict
from stabkit.atlas.tuning import Tune, choose, shared_values
from stabkit.atlas.views import TUNED_COLUMNS, equal_view, grid_view, tuned_view
from stabkit.store.atomic import atomic_write_csv, atomic_write_text
from stabkit.store.outdir import FIGURES

TUNED_POLICY = ("Tuned view (first): every algorithm runs at every value of the grid on the suite's first seed "
                "(no top-up there); per algorithm and task the value with the best validation score at T is "
                "chosen -- trajectory A's accuracy on the held-out samples of the training clients (regression: "
                "the lowest validation loss), pooled over both perturbations; ties go to the smaller value; the "
                "test data take no part -- and only the cells at the chosen values are topped up. Everything "
                "else as in the equal-rate view: ")


def tuned_page(grid: pd.DataFrame, meta: dict, suite: Suite, grid_jobs: list, out: Path, titles: dict,
               extras) -> tuple:
    """``(tuned cells, extras, policy)`` for :func:`stabkit.atlas.page.write_page` from the cells of the
    whole grid and the grid pass's jobs (the choice is theirs alone)."""
    tune = Tune(meta["tune"]["key"], tuple(meta["tune"]["grid"]))
    chosen = choose(grid_jobs, tune)
    shared = shared_values(suite_spec_dict(suite, meta["algos"]), tune)
    tuned, equal = tuned_view(grid, tune.key, chosen), equal_view(grid, tune.key, shared)
    every = grid_view(grid, tune.key)
    atomic_write_csv(out / "grid.csv", every.drop(columns=["curve", "job_dirs"], errors="ignore")
                     .assign(jobs=every["jobs"].map(";".join)))
    figure = draw_stability_accuracy(every, tune.key, chosen, out / FIGURES, titles)
    if len(equal):
        atomic_write_text(out / "summary_equal.md", wide_markdown(equal, titles))
    values = sorted({v for v in shared.values() if v is not None})
    at = f"{tune.key} = {', '.join(f'{v:g}' for v in values)}"
    sections = [{"heading": f"Equal-rate view: every algorithm at the suite's shared {at}",
                 "note": "The same cells at one shared value, ranked among themselves: a larger effective step "
                         "(heavy-ball momentum multiplies it by about 1/(1 - β)) moves trajectories apart "
                         "faster, so this view favours the algorithms the shared value suits."
                         if len(equal) else f"The grid does not hold the shared value ({at}): no equal-rate view.",
                 "cells": equal, "prefix": "equal-"}]
    extras = dataclasses.replace(
        extras, columns=TUNED_COLUMNS, heading=f"Tuned view: every algorithm at its own {tune.key}",
        note="Each cell at the value its algorithm chose on this task (column 'tuned value'); 'D_T at matched acc' "
             "reads each algorithm's curve over the grid at the table's matched level.",
        sections=sections,
        figures=[(figure, "Stability against accuracy across the grid", f"Per table, each algorithm's D_T (± 95% "
                  f"CI) against test accuracy (test loss for regression) at every {tune.key} of the grid; ringed: "
                  f"the tuned value; dashed: the matched level (the lowest best accuracy of the learning "
                  f"algorithms, low outliers left out).")])
    return tuned, extras, TUNED_POLICY + POLICY
