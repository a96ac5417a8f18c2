"""DP-FedAvg in the atlas (CI size): each noise level is its own row (a named variant), its cells carry the
accountant's and the measured epsilon of their jobs, and the page plots D_T against epsilon."""
import json

import numpy as np
import pandas as pd
import pytest

from stabkit.atlas.runner import DP_LEVELS, resolve_algos
from stabkit.privacy.accountant import Schedule, epsilons
from tests.helpers import cli

ALGOS = "fedavg,dp_fedavg[noise_multiplier=0.5],dp_fedavg[noise_multiplier=2]"
LOW, HIGH = "dp_fedavg[noise_multiplier=0.5]", "dp_fedavg[noise_multiplier=2]"


@pytest.fixture(scope="module")
def atlas(tmp_path_factory):
    """The CI suite over FedAvg and DP-FedAvg at z = 0.5 and 2 (18 jobs)."""
    from stabkit_cli.main import main

    out = tmp_path_factory.mktemp("atlas") / "atlas"
    main(["atlas", "--suite", "ci", "--algos", ALGOS, "--seeds", "1", "--pairs", "4", "--no-projection",
          "--workers", "1", "--out", str(out), "--quiet"])
    return out, pd.read_csv(out / "cells.csv")


def test_an_atlas_of_all_algorithms_has_dp_fedavg_at_three_noise_levels():
    names = resolve_algos(None)
    assert [n for n in names if n.startswith("dp_fedavg")] == list(DP_LEVELS)
    assert "fedavg" in names and len(names) == len(set(names))


def test_dp_cells_carry_the_epsilons_of_their_jobs(atlas):
    out, cells = atlas
    assert cells.loc[cells["algo"] == "fedavg", "epsilon"].isna().all()
    dp = cells[cells["algo"].str.startswith("dp_fedavg")]
    assert len(dp) == 2 * 3 * 2
    assert set(dp["name"]) == {"DP-FedAvg (noise_multiplier = 0.5)", "DP-FedAvg (noise_multiplier = 2)"}
    assert (dp["epsilon_measured"] <= dp["epsilon"]).all() and (dp["epsilon_measured"] > 0).all()
    for _, row in dp.iterrows():
        record = json.loads((out / "sweep" / "jobs" / row["jobs"] / "privacy.json").read_text())
        expected = epsilons(Schedule.from_dict(record["schedule"]), 1e-5)["epsilon"]
        assert row["epsilon"] == pytest.approx(expected, rel=1e-6)  # cells.csv keeps 6 digits
        assert row["noise_multiplier"] == record["schedule"]["noise_multiplier"]
    by = dp.set_index(["task", "perturb", "algo"])
    for (task, perturb), _ in dp.groupby(["task", "perturb"]):
        assert by.loc[(task, perturb, LOW), "epsilon"] > 5 * by.loc[(task, perturb, HIGH), "epsilon"]


def test_with_coupled_noise_more_noise_moves_the_digits_pair_further_apart(atlas):
    """Measured, not hoped for: the noise both runs share does not pull them together; on digits under client
    perturbation D_T grows from z = 0.5 to z = 2 (CI run: 0.91 +- 0.04 -> 1.82 +- 0.05), above FedAvg's."""
    _, cells = atlas
    row = {a: cells[(cells["task"] == "digits") & (cells["perturb"] == "client") & (cells["algo"] == a)].iloc[0]
           for a in ("fedavg", LOW, HIGH)}
    assert row[HIGH]["D_T"] - row[HIGH]["D_T.hw"] > row[LOW]["D_T"] + row[LOW]["D_T.hw"]
    assert row[LOW]["D_T"] - row[LOW]["D_T.hw"] > row["fedavg"]["D_T"] + row["fedavg"]["D_T.hw"]


def test_the_page_plots_stability_against_privacy(atlas):
    out, _ = atlas
    html = (out / "index.html").read_text()
    assert "Stability against privacy" in html and (out / "figures" / "privacy.png").stat().st_size > 10_000
    assert np.isfinite(pd.read_csv(out / "cells.csv")["epsilon"]).sum() == 12


def test_a_variant_list_keeps_its_commas_and_a_bad_variant_is_one_line(tmp_path, capsys):
    assert resolve_algos("fedavg, dp_fedavg[clip=2,noise_multiplier=3]") == ["fedavg",
                                                                             "dp_fedavg[clip=2,noise_multiplier=3]"]
    code, _, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg,dp_fedavg[noise_multiplier=-1]", "--out",
                        str(tmp_path / "a"), "--no-projection"], capsys)
    assert code == 2 and err.count("\n") == 1 and "noise_multiplier=-1" in err and not (tmp_path / "a").exists()
