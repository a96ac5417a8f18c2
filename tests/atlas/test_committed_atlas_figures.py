"""The committed tuned atlas cannot go stale: its figures are redrawn with the current code from the tables
committed beside them (``figures/atlas/tuned/data``: what ``stabkit atlas --tune`` wrote, ``make atlas-tuned``)
and must describe the same plot; its summary table is the one those cells give."""
import json
from pathlib import Path

import pandas as pd
import pytest

from stabkit.plotting import SIDECAR, same_figure

ROOT = Path(__file__).resolve().parents[2]
TUNED = ROOT / "figures" / "atlas" / "tuned"


@pytest.fixture(scope="module")
def redrawn(tmp_path_factory) -> Path:
    from stabkit.atlas.tunedpage import redraw

    out = tmp_path_factory.mktemp("tuned")
    redraw(TUNED / "data", out)
    return out


@pytest.mark.parametrize("name", ["stability_accuracy", "privacy"])
def test_the_tuned_atlas_figures_are_what_the_code_draws_now(name, redrawn):
    committed = json.loads((TUNED / f"{name}{SIDECAR}").read_text())
    differences = same_figure(committed, json.loads((redrawn / f"{name}{SIDECAR}").read_text()), path=name)
    assert not differences, f"figures/atlas/tuned/{name}.png is stale (make atlas-tuned):\n" + "\n".join(differences[:10])


def test_every_series_of_the_stability_figure_is_told_apart():
    """At most eight algorithms per panel, each with its own legend entry, colour and marker; every tuned cell's
    point is on its panel."""
    fig = json.loads((TUNED / f"stability_accuracy{SIDECAR}").read_text())
    for ax in fig["axes"]:
        assert len(ax["legend"]) == len(set(ax["legend"])) <= 9  # eight and FedAvg's reference
    cells = pd.read_csv(TUNED / "data" / "cells.csv")
    assert len(fig["axes"]) == 3 * cells.groupby(["task", "perturb"]).ngroups


def test_no_tuned_cell_sits_on_an_unextended_edge():
    """Every choice on or beyond a grid's edge says what stopped it: the value beyond was worse, no better or
    diverged, or the limit / the range's end (never a pending extension)."""
    ext = json.loads((TUNED / "data" / "extensions.json").read_text())
    assert all(e["stop"] in ("worse", "no better", "diverged", "limit", "range end") for e in ext["edges"])
    cells = pd.read_csv(TUNED / "data" / "cells.csv")
    grid = json.loads((TUNED / "data" / "atlas.json").read_text())["tune"]["grid"]
    at_edge = cells[(cells["param.lr"] <= min(grid)) | (cells["param.lr"] >= max(grid))]
    assert at_edge["tuned"].str.contains(r"\((?:.*)(?:worse|no better|diverged|limit|range end)").all()
