"""``stabkit atlas --tune``: the validation metric, the grid, the choice (validation only, ties to the
smaller value), the tuned and equal-rate views, D_T at matched accuracy, resuming and bad input."""
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from stabkit.atlas.cells import JobResult
from stabkit.atlas.extend import EXTEND
from stabkit.atlas.matched import at_level, matched_table
from stabkit.atlas.suites import SUITES, suite_spec_dict
from stabkit.atlas.tuning import Axis, Tune, choose, grid_spec, parse_tune, tuned_spec
from stabkit.store.runstore import load_run
from stabkit.testing.problems import A, B, tiny_run
from tests.helpers import cli

ARGS = ["atlas", "--suite", "ci", "--algos", "fedavg,fedavgm,fosm", "--seeds", "1", "--pairs", "3", "--tune",
        "lr", "--ci-target", "0.1", "--max-units", "9", "--no-projection", "--quiet", "--workers", "1"]


def test_validation_metrics_are_the_training_clients_held_out_samples():
    """val_loss = mean over the training clients' held-out samples of 0.5 (a.x - b)^2, by hand; the held-out
    clients' samples are not in it (they give R_u)."""
    run = tiny_run("fedavg", rounds=1)
    rec = run.step()
    out = run.evaluator.evaluate(run.engine.x, rec.rows)
    x = run.engine.x[0, 0].numpy()
    by_hand = np.mean([0.5 * (A[i][0] @ x - B[i][0]) ** 2 for i in range(2)])
    assert out["val_loss"][0, 0] == pytest.approx(by_hand, rel=1e-12)
    assert np.isnan(out["val_acc"][0, 0])  # regression: no accuracy


def test_parse_tune_grids_and_defaults():
    assert parse_tune("lr=0.3,0.01,0.1", "small") == Tune("lr", (0.01, 0.1, 0.3))
    assert parse_tune("lr", "small").grid == (0.0125, 0.025, 0.05, 0.1, 0.2)
    assert 0.05 in parse_tune("lr", "small").grid  # the suite's shared rate: the equal-rate view is a grid point
    assert parse_tune("hp.beta=0.5,0.9", "ci") == Tune("hp.beta", (0.5, 0.9))
    assert parse_tune(None, "small") is None
    two = parse_tune("lr=0.1,0.2,beta=0.95,0.8,fedcm.alpha=0.05,0.1", "ci")
    assert two == Tune("lr", (0.1, 0.2), (Axis("hp.beta", (0.8, 0.95)), Axis("hp.alpha", (0.05, 0.1), ("fedcm",))))
    assert parse_tune("lr,hp", "small").extra == (Axis("hp", ()),)  # the default table, bound to the algorithms


def test_bind_restricts_each_further_axis_to_the_algorithms_that_have_it():
    from stabkit.atlas.tuning import bind

    tune = bind(parse_tune("lr,hp", "small"), ["fedavg", "fedavgm", "fedprox", "fedcm"])
    assert set(tune.extra) == {Axis("hp.beta", (0.8, 0.9, 0.95), ("fedavgm",)),
                               Axis("hp.alpha", (0.05, 0.1, 0.2), ("fedcm",)), Axis("hp.lam", (0.001, 0.01, 0.1), ("fedprox",))}
    beta = bind(parse_tune("lr,beta=0.5,0.9", "small"), ["fedavg", "fedavgm", "fedanag"])
    assert beta.extra == (Axis("hp.beta", (0.5, 0.9), ("fedavgm", "fedanag")),)
    assert [a.key for a in beta.axes("fedavg")] == ["lr"] and [a.key for a in beta.axes("fedanag")] == ["lr", "hp.beta"]

def test_grid_spec_and_tuned_spec():
    """The grid pass is every suite row at every point of its algorithm's grid (lr x beta for FedAvgM, lr alone
    for FedAvg, beta null there) on the first seed; the tuned spec zips each row's chosen point (what the top-up
    extends)."""
    spec = suite_spec_dict(SUITES["ci"], ["fedavg", "fedavgm"])
    tune = Tune("lr", (0.02, 0.05), (Axis("hp.beta", (0.5, 0.9), ("fedavgm",)),))
    grid = grid_spec(spec, tune, (0,))
    assert "lr" not in grid["base"] and grid["product"] == {"seed": [0]}
    rows = list(zip(grid["zip"]["algo"], grid["zip"]["lr"], grid["zip"]["hp.beta"]))
    assert len(rows) == 6 * 2 + 6 * 4
    assert rows[:2] == [("fedavg", 0.02, None), ("fedavg", 0.05, None)]
    assert rows[6 * 2:6 * 2 + 4] == [("fedavgm", 0.02, 0.5), ("fedavgm", 0.02, 0.9), ("fedavgm", 0.05, 0.5),
                                     ("fedavgm", 0.05, 0.9)]
    chosen = {(t, a): ({"lr": 0.02, "hp.beta": 0.5} if a == "fedavgm" else {"lr": 0.05})
              for t in ("digits", "synthetic", "quadratic") for a in ("fedavg", "fedavgm")}
    tuned = tuned_spec(spec, tune, chosen, (0,))
    assert list(zip(tuned["zip"]["algo"], tuned["zip"]["lr"], tuned["zip"]["hp.beta"])) == \
        [(a, 0.02, 0.5) if a == "fedavgm" else (a, 0.05, None) for a in spec["zip"]["algo"]]


def _job(task, algo, lr, acc, perturb="client", diverged=None, **hp):
    job = JobResult("j", {"task": task, "algo": algo, "lr": lr, "perturb": perturb, **hp}, {}, Path("."), "done",
                    diverged_round=diverged, curves=np.zeros((1, 2)))
    job.validation = {"acc": acc, "loss": 1.0}
    return job


def test_choice_is_the_best_mean_validation_score_ties_to_the_smaller_and_diverged_never_wins():
    tune = Tune("lr", (0.01, 0.1, 1.0))
    jobs = [_job("t", "a", 0.01, 0.5), _job("t", "a", 0.01, 0.7, "sample"),    # mean 0.6
            _job("t", "a", 0.1, 0.9), _job("t", "a", 0.1, 0.2, "sample"),      # mean 0.55
            _job("t", "a", 1.0, 0.99), _job("t", "a", 1.0, 0.99, "sample", diverged=3),  # a diverged job: -inf
            _job("t", "b", 0.01, 0.8), _job("t", "b", 0.1, 0.8), _job("t", "b", 1.0, 0.7)]  # tie: smaller
    assert choose(jobs, tune) == {("t", "a"): {"lr": 0.01}, ("t", "b"): {"lr": 0.01}}
    jobs[0].validation = {"acc": math.nan, "loss": 0.5}  # regression: minus the loss
    jobs[1].validation = {"acc": math.nan, "loss": 0.5}
    assert choose(jobs, tune)[("t", "a")] == {"lr": 0.1}  # -0.5 < 0.55
    # a value beyond the grid wins only where it scores better: a tie stays inside the grid
    ext = [_job("t", "b", 0.005, 0.8), _job("t", "b", 0.001, 0.9)]
    assert choose(jobs + ext[:1], tune)[("t", "b")] == {"lr": 0.01}
    assert choose(jobs + ext, tune)[("t", "b")] == {"lr": 0.001}


def test_d_t_at_matched_accuracy_by_hand():
    """Level = the lowest best accuracy of the learning algorithms (b's 0.8); a crosses 0.8 between its
    lr 0.1 (0.7, D 2) and 0.3 (0.9, D 4): D = 3, hw 0.15; b reaches 0.8 at its smallest lr: '<='."""
    rows = [("a", 0.1, 0.7, 2.0, 0.1), ("a", 0.3, 0.9, 4.0, 0.2), ("a", 1.0, 0.1, 9.0, 1.0),
            ("b", 0.1, 0.8, 1.0, 0.05), ("b", 0.3, 0.75, 1.5, 0.05), ("c", 0.1, 0.1, 0.5, 0.01)]
    grid = pd.DataFrame([{"task": "t", "perturb": "client", "algo": a, "param.lr": lr, "test_acc": acc, "D_T": d,
                          "D_T.hw": hw, "status": "ok" if acc > 0.5 else "no learning"} for a, lr, acc, d, hw in rows])
    m = matched_table(grid, "lr").set_index("algo")
    assert (m["level"] == 0.8).all()
    assert m.loc["a", "D_T@level"] == pytest.approx(3.0) and m.loc["a", "D_T@level.hw"] == pytest.approx(0.15)
    assert m.loc["a", "matched"] == "3 ± 0.15" and m.loc["b", "matched"] == "≤ 1 ± 0.05"
    assert m.loc["c", "matched"] == "not reached"
    assert at_level(grid[grid["algo"] == "a"], "lr", 0.95) == {}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A tuned CI atlas (FedAvg and FedAvgM = FOSM, 3 rates, 3 pairs, top-up at the chosen rates)."""
    from stabkit_cli.main import main

    out = tmp_path_factory.mktemp("tuned") / "atlas"
    main([*ARGS, "--out", str(out)])
    return out


def test_the_choice_is_the_best_validation_accuracy_of_the_grid_pass(tuned):
    """Recomputed from the grid jobs' metrics.csv (trajectory A's val_acc at T, pooled over perturbations):
    the tuned view's value is its argmax; the test accuracy took no part."""
    grid = pd.read_csv(tuned / "grid.csv")
    cells = pd.read_csv(tuned / "cells.csv")
    assert {0.02, 0.05, 0.15} <= set(grid["param.lr"])
    beyond = set(grid["param.lr"]) - {0.02, 0.05, 0.15}  # extensions: the grid's ratio at each end, x3 and x0.4
    steps = {float(f"{e * r ** k:.6g}") for e, r in ((0.15, 3), (0.02, 0.4)) for k in range(1, 5)}
    assert beyond and beyond <= steps
    dirs = [tuned / "sweep", *sorted(tuned.glob(f"{EXTEND}*"))]
    for (task, algo), g in cells.groupby(["task", "algo"]):
        scores = {}
        for job in (j for d in dirs for j in (d / "jobs").iterdir()):
            df = load_run(job)
            cfg = df.attrs["config"]
            if cfg["task"] == task and cfg["algo"] == algo:
                end = df[df["round"] == df["round"].max()]
                score = end["val_acc_a"].mean() if end["val_acc_a"].notna().all() else -end["val_loss_a"].mean()
                scores.setdefault(cfg["lr"], []).append(score)
        best = max(sorted(scores, key=lambda v: (not 0.02 <= v <= 0.15, v)), key=lambda v: np.mean(scores[v]))
        assert set(g["param.lr"]) == {best}, (task, algo, scores)
        # extended until interior: the value beyond the choice on each side at an edge was tried, and lost
        for side in (1, -1):
            if (best - (0.15 if side > 0 else 0.02)) * side >= 0:
                nb = min((v for v in scores if (v - best) * side > 0), key=lambda v: abs(v - best))
                assert np.mean(scores[nb]) <= np.mean(scores[best])


def test_tuned_page_has_both_views_the_figure_and_aliases_once(tuned):
    html = (tuned / "index.html").read_text()
    assert html.count('<table class="sortable"') == 12  # tuned + equal-rate views, 6 tables each
    assert html.index("Tuned view") < html.index("Equal-rate view")
    assert "FedAvgM (= FOSM, ν = 1)" in html and "FOSM (server momentum)" not in html
    assert (tuned / "figures" / "stability_accuracy.png").stat().st_size > 10_000
    assert "Stability against accuracy across the grid" in html
    cells, grid = pd.read_csv(tuned / "cells.csv"), pd.read_csv(tuned / "grid.csv")
    assert len(cells) == 12 and set(cells["algo"]) == {"fedavg", "fedavgm"}
    assert cells["matched"].notna().all()
    for lr, text in zip(cells["param.lr"], cells["tuned"]):  # on or beyond an edge: what stopped the extension
        inside = 0.02 < lr < 0.15
        assert text == f"{lr:g}" if inside else (text.startswith(f"{lr:g} (") and
                                                  any(w in text for w in ("worse", "diverged", "no better"))), text
    # the equal-rate view: the grid's cells at the shared 0.05, its D_T as measured there
    equal = grid[grid["param.lr"] == 0.05]
    for _, c in equal.iterrows():
        assert f'id="table-equal-{c["task"]}-{c["perturb"]}"' in html
    wide = (tuned / "summary_equal.md").read_text()
    avg = equal[(equal["algo"] == "fedavg") & (equal["task"] == "digits") & (equal["perturb"] == "client")].iloc[0]
    assert f"| FedAvg | {avg['D_T']:.3g} ± {avg['D_T.hw']:.2g} (" in wide
    mine = cells[(cells["algo"] == "fedavg") & (cells["task"] == "digits") & (cells["perturb"] == "client")].iloc[0]
    assert f"| FedAvg | {mine['D_T']:.3g} ± {mine['D_T.hw']:.2g} @{mine['tuned']} (" in (tuned / "summary.md").read_text()


def test_resuming_a_tuned_atlas_continues_with_the_same_choice(tuned, capsys):
    """The same command again runs nothing; with its top-up removed (stopped before it), it re-derives the
    same choice and the same top-up jobs and ends with the same cells."""
    before = pd.read_csv(tuned / "cells.csv")
    code, out, err = cli([a for a in ARGS if a != "--quiet"] + ["--out", str(tuned)], capsys)
    assert code == 0, err
    assert "36 already finished, 0 to run" in out  # the grid pass (3 rates), then each extension round
    topped = sorted(p.name for p in (tuned / "topup" / "jobs").iterdir())
    assert topped  # the chosen cells were topped up
    shutil.rmtree(tuned / "topup")
    code, out, err = cli([*ARGS, "--out", str(tuned)], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tuned / "topup" / "jobs").iterdir()) == topped
    for task, g in before.groupby("task"):  # the printed choice: every one interior after the extensions
        line = next(x for x in out.splitlines() if x.startswith(f"tuned lr on {task} "))
        assert "edge" not in line and all(f"{a} {lr:g}" in line for a, lr in zip(g["algo"], g["param.lr"]))
    after = pd.read_csv(tuned / "cells.csv")
    assert after[["task", "perturb", "algo", "param.lr", "units"]].equals(before[["task", "perturb", "algo",
                                                                                  "param.lr", "units"]])
    assert np.array_equal(after["D_T"], before["D_T"])


@pytest.mark.parametrize("args, message", [
    (["--tune", "lr=0.1,0"], "invalid tune='lr=0': grid values must be finite numbers > 0"),
    (["--tune", "lr=0.1,-1"], "invalid tune='lr=-1'"),
    (["--tune", "lr=0.1,nan"], "invalid tune='lr=nan'"),
    (["--tune", "lr=inf"], "invalid tune='lr=inf'"),
    (["--tune", "lr=0.1,x"], "invalid tune='lr=x'"),
    (["--tune", "momentum=0.1"], "invalid tune='momentum': one of lr, global_lr or hp.NAME"),
    (["--tune", "lr,nosuch=0.1,0.2"], "invalid tune='nosuch': a hyperparameter of an algorithm of this atlas"),
    (["--tune", "lr,fedavg.beta=0.5"], "invalid tune='fedavg.beta': a hyperparameter of an algorithm"),
    (["--tune", "lr,beta"], "invalid tune='beta': a further axis NAME=V1,V2"),
    (["--tune", "lr,beta=0.5,0.5"], "each grid value once"),
    (["--tune", "hp.beta=0.5,0.9", "--algos", "fedavgm,fedavg"],
     "invalid tune='hp.beta': algorithm fedavg has no hyperparameter 'beta'"),
    (["--suite", "paper", "--tune", "lr=0.01,0.1"], "invalid data_dir=None"),
    (["--suite", "paper", "--tune", "lr"], "suite 'paper' has no default grid for lr"),
])
def test_bad_tune_is_one_line_exit_2_nothing_started(tmp_path, capsys, args, message):
    out = tmp_path / "atlas"
    base = [] if "--suite" in args else ["--suite", "ci"]
    code, stdout, err = cli(["atlas", *base, *args, "--out", str(out), "--no-projection"], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and stdout == ""


def test_tuned_page_fits_1280_pixels_and_its_tables_still_sort(tuned):
    """At 1280 px the page does not overflow (the widest tables scroll in their own boxes, the algorithm
    column sticky); clicking D_T in a tuned table orders its rows by D_T, again reverses them."""
    from browser import chromium, fits
    from selenium.webdriver.common.by import By

    cells = pd.read_csv(tuned / "cells.csv")
    with chromium(1280) as driver:
        driver.get((tuned / "index.html").as_uri())
        scroll_width, inner_width = fits(driver)
        assert scroll_width <= inner_width
        table = driver.find_element(By.ID, "table-digits-client")
        box = driver.execute_script("var b = arguments[0].parentElement; return [b.scrollWidth, b.clientWidth, "
                                    "getComputedStyle(b).overflowX];", table)
        assert box[2] == "auto" and box[1] <= inner_width
        header = table.find_elements(By.CSS_SELECTOR, "thead th")
        labels = [h.text for h in header]
        assert labels[:4] == ["rank", "algorithm", "tuned value", "D_T at matched acc"]
        title = {"fedavg": "FedAvg", "fedavgm": "FedAvgM (= FOSM, ν = 1)"}
        by_disc = [title[a] for a in cells[(cells["task"] == "digits") & (cells["perturb"] == "client")]
                   .sort_values("D_T")["algo"]]

        def order():
            return [td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody td.name")]

        d_t = next(h for h in header if h.text.startswith("D_T ±"))
        driver.execute_script("arguments[0].scrollIntoView();", d_t)
        d_t.click()
        assert order() == by_disc
        d_t.click()
        assert order() == by_disc[::-1]
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []


def test_the_matched_level_leaves_low_outliers_out():
    """Five algorithms reach 0.95-0.97 at best and one (strong DP noise) 0.69: the level is 0.95, which the five
    reach and the outlier does not; with three algorithms every learning one counts (the plain minimum)."""
    from stabkit.atlas.matched import matched_level, matched_table

    bests = {"a": 0.97, "b": 0.96, "c": 0.955, "d": 0.95, "e": 0.965, "dp": 0.69}
    rows = [{"task": "t", "perturb": "client", "algo": a, "param.lr": lr, "status": "ok", "test_acc": acc * f,
             "test_loss": 1 - acc * f, "D_T": 1.0 + lr, "D_T.hw": 0.1}
            for a, acc in bests.items() for lr, f in ((0.01, 0.9), (0.1, 1.0))]
    table = pd.DataFrame(rows)
    assert matched_level(table) == pytest.approx(0.95)
    m = matched_table(table, "lr").set_index("algo")
    assert m.loc["dp", "matched"] == "not reached" and m.loc["d", "D_T@level"] == pytest.approx(1.1)
    three = table[table["algo"].isin(["a", "b", "dp"])]
    assert matched_level(three) == pytest.approx(0.69)


def test_a_tuned_atlas_of_one_algorithm_knows_each_jobs_algorithm(tmp_path):
    """`--algos fedavg --tune lr=...`: the algorithm (and a single task) sit in the spec's base, not in the jobs'
    params; reading the grid pass gives every job its (task, algorithm) all the same, and the choice is made
    (it ended in KeyError 'algo' after the whole grid had run)."""
    import json

    from stabkit.atlas.cells import read_jobs

    spec = {"name": "t", "base": {"algo": "fedavg", "task": "quadratic", "rounds": 2}, "zip": {},
            "product": {"seed": [0], "lr": [0.05, 0.15]}}
    jobs = {f"seed=0,lr={v}": {"state": "failed", "params": {"seed": 0, "lr": v}, "error": "x"} for v in (0.05, 0.15)}
    (tmp_path / "manifest.json").write_text(json.dumps({"spec": spec, "spec_hash": "h", "axes": ["seed", "lr"],
                                                        "jobs": jobs}))
    read = read_jobs(tmp_path)
    assert [(j.params["task"], j.params["algo"]) for j in read] == [("quadratic", "fedavg")] * 2
    assert choose(read, Tune("lr", (0.05, 0.15))) == {("quadratic", "fedavg"): {"lr": 0.05}}  # all -inf: the smaller


def test_dry_run_projects_the_extensions(tmp_path, capsys):
    """--dry-run prints the grid's jobs (FedAvgM's lr x beta product counted) and the extensions' cost: one
    round is at most one job per (task, perturbation, algorithm), the worst case 4 such rounds; nothing runs."""
    out = tmp_path / "atlas"
    code, stdout, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg,fedavgm", "--tune", "lr,fedavgm.beta=0.8,0.9",
                             "--out", str(out), "--dry-run", "--workers", "1"], capsys)
    assert code == 0, err
    assert "(x 2 of hp.beta for fedavgm) (first seed) = 54 jobs" in stdout  # 6 x (3 + 3 x 2)
    assert "each round at most 12 jobs" in stdout and "to the limit everywhere: 48 jobs" in stdout
    assert not out.exists()
