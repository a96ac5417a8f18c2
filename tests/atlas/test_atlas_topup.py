"""``stabkit atlas --ci-target``: cells whose 95% interval of D_T is wider than asked get more pairs (one job
per cell, a new seed), as a second resumable sweep whose jobs pool into the same cells."""
import pandas as pd
import pytest

from stabkit.atlas.suites import SUITES, suite_spec_dict
from stabkit.atlas.topup import extra_units, seconds_per_pair, topup_dir, topup_spec
from tests.helpers import cli


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
    # losses at 0 and T (what the cells read), no constants (Ĝ and the bounds come from the main sweep's jobs)
    assert spec["base"] == {**main["base"], "eval_every": 100, "constants": False}
    assert main["base"]["checkpoint_every"] == 0  # a sweep resumes job by job: checkpoints were wasted time
    assert set(spec["zip"]) == set(main["zip"]) | {"seed"}
    keys = list(spec["zip"])
    got = sorted(tuple(r[keys.index(k)] for k in ("task", "perturb", "algo", "pairs", "seed"))
                 for r in zip(*spec["zip"].values()))
    assert got == [("digits", "sample", "scaffold", 96, 2), ("quadratic", "client", "fedavg", 5, 2)]
    assert topup_spec(main, {}) is None
    one_size = suite_spec_dict(SUITES["ci"], ["fedavg"])  # pairs in the base (one value): zipped in the top-up
    spec = topup_spec({**one_size, "base": {**one_size["base"], "pairs": 6}}, {("digits", "sample", "fedavg"): 7})
    assert "pairs" not in spec["base"] and spec["zip"]["pairs"] == [7]


def test_later_passes_take_later_seeds_and_the_longest_jobs_run_first():
    main = suite_spec_dict(SUITES["small"], ["fedavg", "scaffold"])
    extra = {("digits", "client", "fedavg"): 10, ("quadratic", "sample", "scaffold"): 100,
             ("digits", "sample", "scaffold"): 40}
    cost = {("digits", "client", "fedavg"): 0.5, ("quadratic", "sample", "scaffold"): 0.03,
            ("digits", "sample", "scaffold"): 0.5}  # jobs of 5 s, 3 s and 20 s
    spec = topup_spec(main, extra, k=2, seconds_per_pair=cost)
    z = spec["zip"]
    assert list(zip(z["task"], z["perturb"], z["algo"], z["pairs"])) == [
        ("digits", "sample", "scaffold", 40), ("digits", "client", "fedavg", 10), ("quadratic", "sample", "scaffold", 100)]
    assert set(z["seed"]) == {max(main["product"]["seed"]) + 2} and spec["name"].endswith("-topup2")
    assert [topup_dir(k) for k in (1, 2, 3)] == ["topup", "topup2", "topup3"]


def test_seconds_per_pair_pool_every_finished_job_of_a_cell():
    from types import SimpleNamespace

    def manifest(jobs):  # a sweep's manifest: its spec's jobs (full configs) and their records
        specs = [SimpleNamespace(id=str(i), config={"task": "digits", "perturb": "sample", "algo": a, "pairs": n})
                 for i, (a, n, _) in enumerate(jobs)]
        return SimpleNamespace(spec=SimpleNamespace(jobs=lambda: specs),
                               jobs={str(i): {"wall_s": w} for i, (_, _, w) in enumerate(jobs)})

    got = seconds_per_pair([manifest([("fedavg", 32, 10.0), ("fedavg", 32, 6.0), ("fedsam", 8, None)]),
                            manifest([("fedavg", 64, 16.0)])])
    assert got == {("digits", "sample", "fedavg"): pytest.approx(32.0 / 128)}  # unfinished jobs carry no time


def test_atlas_tops_up_the_wide_cells_and_pools_them(tmp_path, capsys):
    out = tmp_path / "atlas"
    args = ["atlas", "--suite", "ci", "--algos", "fedavg", "--seeds", "2", "--pairs", "3", "--ci-target", "0.1",
            "--max-units", "12", "--no-projection", "--quiet", "--workers", "1", "--out", str(out)]
    code, stdout, err = cli(args, capsys)
    assert code == 0, err
    cells = pd.read_csv(out / "cells.csv")
    wide = cells[cells["units"] > 6]
    assert "top-up 1 to ±10%" in stdout and len(wide) >= 1 and (wide["units"] <= 12).all()
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

    assert AtlasRequest().target(SUITES["small"]) == 0.1  # the small suite's default: ±10% (issue 23)
    assert AtlasRequest().target(SUITES["ci"]) is None and AtlasRequest(ci_target=0.2).target(SUITES["ci"]) == 0.2
    with_target = dataclasses.replace(SUITES["small"], ci_target=0.2)
    assert AtlasRequest().target(with_target) == 0.2 and AtlasRequest(ci_target=0.1).target(with_target) == 0.1
    assert AtlasRequest(top_up=False).target(with_target) is None  # --no-top-up


def test_a_cell_still_wide_after_a_pass_gets_another_from_every_job_before_it(tmp_path, capsys, monkeypatch):
    import stabkit.atlas.runner as runner

    seen = []  # the units of the cell each pass was asked about: main sweep, then + each pass's pairs

    def extra(cells, target, max_units):  # the digits/client cell stays "wide" for two passes
        units = int(cells.loc[(cells["task"] == "digits") & (cells["perturb"] == "client"), "units"].iloc[0])
        seen.append(units)
        return {("digits", "client", "fedavg"): 2} if len(seen) <= 2 else {}

    monkeypatch.setattr(runner, "extra_units", extra)
    out = tmp_path / "atlas"
    args = ["atlas", "--suite", "ci", "--algos", "fedavg", "--seeds", "2", "--pairs", "3", "--ci-target", "0.1",
            "--no-projection", "--quiet", "--workers", "1", "--out", str(out)]
    code, stdout, err = cli(args, capsys)
    assert code == 0, err
    assert seen == [6, 8, 10] and "top-up 2 to ±10%" in stdout and not (out / "topup3").exists()
    cells = pd.read_csv(out / "cells.csv")
    cell = cells[(cells["task"] == "digits") & (cells["perturb"] == "client")].iloc[0]
    assert (cell["units"], cell["seeds"]) == (10, 4)  # seeds 0, 1 + pass 1's seed 2 + pass 2's seed 3
    seeds = {p.name.split("seed=")[1] for d in ("topup", "topup2") for p in (out / d / "jobs").iterdir()}
    assert seeds == {"2", "3"}
    seen.clear()
    code, _, _ = cli(args, capsys)  # again: every pass is derived as before and resumed, nothing reruns
    assert code == 0 and seen == [6, 8, 10] and len(list((out / "topup2" / "jobs").iterdir())) == 1
