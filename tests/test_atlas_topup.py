"""``stabkit atlas --ci-target``: cells whose 95% interval of D_T is wider than asked get more pairs (one job
per cell, a new seed), as a second resumable sweep whose jobs pool into the same cells."""
import pandas as pd
import pytest
from helpers import cli

from stabkit.atlas.suites import SUITES, suite_spec_dict
from stabkit.atlas.topup import extra_units, topup_spec


def _cells(rows):
    return pd.DataFrame(rows, columns=["task", "perturb", "algo", "status", "D_T.rel_hw", "units", "seeds"])


def test_extra_units_follow_the_square_law_and_the_cap():
    cells = _cells([
        ("digits", "sample", "fedavg", "ok", 0.30, 64, 2),     # (0.3/0.1)^2 * 64 * 1.15 = 662.4 -> cap 512: +448
        ("digits", "sample", "scaffold", "ok", 0.15, 64, 2),   # 2.25 * 64 * 1.15 = 165.6 -> 166: +102 units
        ("digits", "client", "fedavg", "ok", 0.05, 16, 2),     # within the target: nothing
        ("digits", "sample", "fedadam", "no learning", 0.9, 64, 2),  # not ranked: nothing
        ("digits", "sample", "fedsagd", "ok", 0.5, 512, 16),   # already at the cap
    ])
    assert extra_units(cells, 0.1, 512) == {("digits", "sample", "fedavg"): 448, ("digits", "sample", "scaffold"): 102}


def test_topup_spec_is_one_job_per_cell_with_the_extra_pairs_and_a_new_seed():
    main = suite_spec_dict(SUITES["small"], ["fedavg", "scaffold"])
    spec = topup_spec(main, {("digits", "sample", "scaffold"): 96, ("quadratic", "client", "fedavg"): 5})
    assert spec["base"] == {**main["base"], "eval_every": 100}  # losses at 0 and T: what the cells read
    assert set(spec["zip"]) == set(main["zip"]) | {"seed"}
    keys = list(spec["zip"])
    got = sorted(tuple(r[keys.index(k)] for k in ("task", "perturb", "algo", "pairs", "seed"))
                 for r in zip(*spec["zip"].values()))
    assert got == [("digits", "sample", "scaffold", 96, 2), ("quadratic", "client", "fedavg", 5, 2)]
    assert topup_spec(main, {}) is None
    one_size = suite_spec_dict(SUITES["ci"], ["fedavg"])  # pairs in the base (one value): zipped in the top-up
    spec = topup_spec({**one_size, "base": {**one_size["base"], "pairs": 6}}, {("digits", "sample", "fedavg"): 7})
    assert "pairs" not in spec["base"] and spec["zip"]["pairs"] == [7]


def test_atlas_tops_up_the_wide_cells_and_pools_them(tmp_path, capsys):
    out = tmp_path / "atlas"
    args = ["atlas", "--suite", "ci", "--algos", "fedavg", "--seeds", "2", "--pairs", "3", "--ci-target", "0.1",
            "--max-units", "12", "--no-projection", "--quiet", "--out", str(out)]
    code, stdout, err = cli(args, capsys)
    assert code == 0, err
    cells = pd.read_csv(out / "cells.csv")
    wide = cells[cells["units"] > 6]
    assert "top-up to ±10%" in stdout and len(wide) >= 1 and (wide["units"] <= 12).all()
    assert (wide["seeds"] == 3).all() and (cells.loc[cells["units"] == 6, "seeds"] == 2).all()  # + one job each
    assert "topup/jobs/" in (out / "index.html").read_text()  # the extra seeds' runs are linked
    topped = len(list((out / "topup" / "jobs").iterdir()))
    code, stdout, _ = cli(args, capsys)  # the same command again: both sweeps resume, nothing reruns
    assert code == 0 and len(list((out / "topup" / "jobs").iterdir())) == topped
    assert pd.read_csv(out / "cells.csv")["units"].tolist() == cells["units"].tolist()


@pytest.mark.parametrize("args, message", [
    (["--ci-target", "0"], "invalid ci_target=0.0"),
    (["--ci-target", "1.5"], "invalid ci_target=1.5"),
    (["--ci-target", "0.1", "--max-units", "1"], "invalid max_units=1"),
])
def test_bad_targets_are_one_line(tmp_path, capsys, args, message):
    code, stdout, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg", *args, "--out", str(tmp_path / "a"),
                             "--no-projection"], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "a").exists()


def test_the_target_is_the_request_s_else_the_suite_s_and_no_top_up_wins():
    import dataclasses

    from stabkit.atlas.runner import AtlasRequest

    assert AtlasRequest().target(SUITES["small"]) is None  # the small suite's default: no top-up (its time)
    assert AtlasRequest(ci_target=0.1).target(SUITES["small"]) == 0.1
    with_target = dataclasses.replace(SUITES["small"], ci_target=0.2)
    assert AtlasRequest().target(with_target) == 0.2 and AtlasRequest(ci_target=0.1).target(with_target) == 0.1
    assert AtlasRequest(top_up=False).target(with_target) is None  # --no-top-up
