"""``stabkit atlas`` at CI size (the ``ci`` suite: 3 tasks x 2 perturbations, 16 rounds, FedAvg, SCAFFOLD and
FedAdam, one seed): the page and its tables, the claims that hold with margin at this size, the learning
floor, resuming, bad input, ``stabkit report --html``; the page in headless Chromium
(tests/atlas/test_atlas.py)."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from stabkit.atlas.cells import mean_ci
from stabkit.atlas.link import corr_text, pareto_front, rank_correlation, stability_check
from stabkit.atlas.suites import SUITES, suite_spec_dict
from tests.browser import chromium, fits
from tests.helpers import cli

ALGOS = "fedavg,scaffold,fedadam"
CI_ARGS = ["--suite", "ci", "--algos", ALGOS, "--seeds", "1", "--pairs", "8", "--no-projection", "--workers", "1"]


@pytest.fixture(scope="module")
def atlas_dir(tmp_path_factory):
    """The CI-sized atlas, built once for the module (18 jobs)."""
    from stabkit_cli.main import main

    out = tmp_path_factory.mktemp("atlas") / "atlas"
    main(["atlas", *CI_ARGS, "--out", str(out), "--quiet"])
    return out


@pytest.fixture(scope="module")
def cells(atlas_dir):
    return pd.read_csv(atlas_dir / "cells.csv")


def cell(cells, task, perturb, algo):
    row = cells[(cells["task"] == task) & (cells["perturb"] == perturb) & (cells["algo"] == algo)]
    assert len(row) == 1
    return row.iloc[0]


def test_page_tables_and_figures_are_written(atlas_dir, cells):
    html = (atlas_dir / "index.html").read_text()
    assert len(cells) == 3 * 3 * 2  # algorithms x tasks x perturbations
    assert html.count('<table class="sortable"') == 6
    assert html.count("data:image/png;base64,") == 3  # curves, frontier, gap scatter: inline
    assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing fetched from the network
    names = re.findall(r'<td class="l name" data-v="([^"]*)"', html)  # titles, not algo=...
    assert len(names) == 18 and set(names) == {"FedAvg", "SCAFFOLD", "FedAdam"}
    md = (atlas_dir / "cells.md").read_text()
    assert md.count("| rank |") == 6 and "D_T ± 95% CI" in md
    link = json.loads((atlas_dir / "link.json").read_text())
    assert {"all", "client_gap", "theorem"} <= set(link)
    for name in ("curves", "frontier", "gap_vs_discrepancy"):
        assert (atlas_dir / "figures" / f"{name}.png").stat().st_size > 10_000
    # every cell links to its run directory and gives the command that reproduces it
    for job in cells["jobs"]:
        assert (atlas_dir / "sweep" / "jobs" / job / "config.json").is_file()
        assert f"--config sweep/jobs/{job}/config.json" in html


def test_fedadam_does_not_learn_on_digits_and_is_not_ranked(cells):
    """FedAdam at η = 1 does not train the digits MLP (test accuracy at chance): flagged, kept, not ranked,
    never called the least stable; the others learn and are ranked 1..n by D_T."""
    adam = cell(cells, "digits", "client", "fedadam")
    assert adam["status"].startswith("no learning") and np.isnan(adam["rank"])
    assert adam["test_acc"] < 0.15 and adam["D_T"] > 20 * cell(cells, "digits", "client", "fedavg")["D_T"]
    for (task, perturb), g in cells.groupby(["task", "perturb"]):
        ok = g[g["status"] == "ok"]
        assert sorted(ok["rank"]) == list(range(1, len(ok) + 1))
        assert ok.sort_values("rank")["D_T"].is_monotonic_increasing
        assert g[g["status"] != "ok"]["rank"].isna().all()


def test_claims_that_hold_with_margin_at_ci_size(cells):
    """Orderings whose 95% intervals are apart at this size (one seed, 8 pairs, 16 rounds)."""
    # client perturbation moves the model far more than replacing one sample: every task and algorithm
    for task in ("digits", "synthetic", "quadratic"):
        for algo in ("fedavg", "scaffold"):
            client, sample = cell(cells, task, "client", algo), cell(cells, task, "sample", algo)
            assert client["D_T"] - client["D_T.hw"] > 3 * (sample["D_T"] + sample["D_T.hw"])
    # client perturbation: SCAFFOLD more stable than FedAvg on digits, less stable on Synthetic(1,1)
    for task, first, second in (("digits", "scaffold", "fedavg"), ("synthetic", "fedavg", "scaffold")):
        a, b = cell(cells, task, "client", first), cell(cells, task, "client", second)
        assert a["D_T"] + a["D_T.hw"] < b["D_T"] - b["D_T.hw"]
    # client-perturbation intervals are tight at 8 pairs: within ±10% of the mean on the classification tasks
    for task in ("digits", "synthetic"):
        assert cell(cells, task, "client", "fedavg")["D_T.rel_hw"] < 0.10


def test_rerunning_resumes_without_rerunning_jobs(atlas_dir, capsys):
    code, out, err = cli(["atlas", *CI_ARGS, "--out", str(atlas_dir)], capsys)
    assert code == 0, err
    assert "18 already finished, 0 to run" in out


def test_report_html_gives_any_sweep_the_page(atlas_dir, capsys, tmp_path):
    code, out, err = cli(["report", str(atlas_dir / "sweep"), "--out", str(tmp_path / "rep"), "--no-plot", "--html"],
                         capsys)
    assert code == 0, err
    html = (tmp_path / "rep" / "index.html").read_text()
    assert html.count('<table class="sortable"') == 6 and "FedAdam" in html
    assert len(pd.read_csv(tmp_path / "rep" / "cells.csv")) == 18


@pytest.mark.parametrize("args, message", [
    (["--suite", "nope"], "invalid suite='nope': one of small, ci, paper"),
    (["--algos", "fedavg,nope"], "invalid algo='nope'"),
    (["--algos", "no_such_module_xyz:Algo"], "no module named 'no_such_module_xyz'"),
    (["--suite", "paper"], "invalid data_dir=None"),
    (["--suite", "paper", "--data-dir", "EMPTY"], "cifar"),
    (["--seeds", "0"], "invalid seeds=0"),
])
def test_bad_input_one_line_exit_2_nothing_started(tmp_path, capsys, args, message):
    (tmp_path / "empty").mkdir()
    args = [str(tmp_path / "empty") if a == "EMPTY" else a for a in args]
    out = tmp_path / "atlas"
    code, stdout, err = cli(["atlas", *args, "--out", str(out), "--no-projection"], capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and stdout == ""


def test_out_holding_something_else_is_refused(tmp_path, capsys):
    out = tmp_path / "atlas"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg", "--out", str(out)], capsys)
    assert code == 2 and "holds something else" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_suite_spec_shares_settings_per_task_and_varies_only_the_algorithm():
    spec = suite_spec_dict(SUITES["small"], ["fedavg", "fedsagd"])
    assert spec["base"]["lr"] == 0.05 and spec["base"]["local_steps"] == 10 and spec["base"]["rounds"] == 100
    assert spec["product"] == {"seed": [0, 1]}
    rows = list(zip(*spec["zip"].values()))
    assert len(rows) == 2 * 3 * 2 and set(spec["zip"]["algo"]) == {"fedavg", "fedsagd"}
    # the paper suite applies each paper's code reading per algorithm: FedAdam's server lr 0.1
    paper = suite_spec_dict(SUITES["paper"], ["fedavg", "fedadam"], data_dir="/data")
    lrs = dict(zip(paper["zip"]["algo"], paper["zip"]["global_lr"]))
    assert lrs["fedadam"] == 0.1 and lrs["fedavg"] is None


def test_cell_statistics_frontier_correlation_and_theorem_check():
    mean, hw, n = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert (mean, n) == (2.5, 4) and hw == pytest.approx(3.182446 * np.std([1, 2, 3, 4], ddof=1) / 2, rel=1e-5)
    cells = pd.DataFrame({"task": ["t"] * 4, "perturb": ["client"] * 4, "status": ["ok", "ok", "ok", "no learning"],
                          "D_T": [1.0, 2.0, 3.0, 0.1], "test_acc": [0.8, 0.9, 0.85, 0.1],
                          "gap": [0.1, 0.2, 0.3, 0.0], "G": [1.0, 0.05, 1.0, 1.0]})
    assert list(pareto_front(cells)) == [True, True, False, False]  # 3 is beaten by 2; 4 does not learn
    corr = rank_correlation(cells)  # 3 cells: no rho, no [-1, 1] interval
    assert corr["n"] == 3 and np.isnan(corr["rho"]) and corr_text(corr) == "too few cells (3)"
    six = pd.DataFrame({"task": ["t"] * 6, "perturb": ["client"] * 6, "status": ["ok"] * 6,
                        "D_T": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "gap": [0.1, 0.3, 0.2, 0.4, 0.6, 0.5]})
    corr = rank_correlation(six)  # ranks of the gap 1 3 2 4 6 5: d^2 = 4, rho = 1 - 6 * 4 / (6 * 35)
    assert corr["n"] == 6 and corr["rho"] == pytest.approx(1 - 24 / 210)
    assert corr_text(corr).startswith(f"ρ = {1 - 24 / 210:.2f} [") and corr_text(corr).endswith("over 6 cells")
    check = stability_check(cells)
    assert (check["n"], check["m"]) == (2, 3) and list(check["holds"]) == [True, False, True]


def test_page_in_headless_chromium(atlas_dir, cells):
    """The page loads in a real browser without console errors, has one row per algorithm in every table,
    sorting a column reorders the rows; the screenshot is saved beside the page (atlas/screenshot.png)."""
    from selenium.webdriver.common.by import By

    with chromium(1500) as driver:
        driver.get((atlas_dir / "index.html").as_uri())
        assert driver.title.startswith("stabkit stability atlas")
        tables = driver.find_elements(By.CSS_SELECTOR, "table.sortable")
        assert len(tables) == 6
        for table in tables:  # one row per algorithm
            names = [td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody td.name")]
            assert sorted(names) == ["FedAdam", "FedAvg", "SCAFFOLD"]
        table = driver.find_element(By.ID, "table-synthetic-client")

        def order():
            return [td.text for td in table.find_elements(By.CSS_SELECTOR, "tbody td.name")]

        title = {"fedavg": "FedAvg", "scaffold": "SCAFFOLD", "fedadam": "FedAdam"}
        by_disc = [title[a] for a in cells[(cells["task"] == "synthetic") & (cells["perturb"] == "client")]
                   .sort_values("D_T")["algo"]]
        header = table.find_elements(By.CSS_SELECTOR, "thead th")
        assert header[3].text.startswith("D_T")
        header[3].click()
        assert order() == by_disc
        header[3].click()
        assert order() == by_disc[::-1]
        header[1].click()  # the algorithm column: alphabetical
        assert order() == sorted(by_disc)
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        shot = atlas_dir / "screenshot.png"
        assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 20_000


def test_page_fits_1280_pixels(atlas_dir):
    """At 1280 px no table widens the page: each scrolls inside its own box, the algorithm column held."""
    from selenium.webdriver.common.by import By

    with chromium(1280) as driver:
        driver.get((atlas_dir / "index.html").as_uri())
        scroll_width, inner_width = fits(driver)
        assert scroll_width <= inner_width
        td = driver.find_element(By.CSS_SELECTOR, "table.sortable tbody td.name")
        assert td.value_of_css_property("position") == "sticky"


def test_a_diverged_cell_is_kept_with_its_round(tmp_path, capsys):
    """``stabkit report --html`` on a sweep where one setting diverges: that row says so, with the round,
    and is not ranked; the other is ranked."""
    sweep = tmp_path / "sw"
    code, _, err = cli(["sweep", "--set", "task=quadratic", "--set", "rounds=6", "--set", "pairs=2", "--set",
                        "clients=6", "--set", "heldout_clients=2", "--set", "constants=false", "--axis", "lr=0.05,40",
                        "--out", str(sweep), "--quiet"], capsys)
    assert code == 1, err  # one job failed: it diverged
    code, _, err = cli(["report", str(sweep), "--no-plot", "--html"], capsys)
    assert code == 0, err
    cells = pd.read_csv(sweep / "report" / "cells.csv").set_index("name")
    assert list(cells.index) == ["FedAvg, lr 0.05", "FedAvg, lr 40"]
    assert cells.loc["FedAvg, lr 40", "status"] == "diverged at round 1"
    assert np.isnan(cells.loc["FedAvg, lr 40", "rank"]) and cells.loc["FedAvg, lr 0.05", "rank"] == 1
    assert "diverged at round 1" in (sweep / "report" / "index.html").read_text()


def test_workers_default_to_one_per_usable_cpu(tmp_path, capsys):
    from stabkit.engine.threads import usable_cpus

    code, stdout, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg", "--dry-run", "--out",
                             str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert f"on {len(usable_cpus())} worker(s)" in stdout and not (tmp_path / "a").exists()


QUICK = ["--set", "task=quadratic", "--set", "rounds=6", "--set", "pairs=2", "--set", "clients=6", "--set",
         "heldout_clients=2", "--set", "constants=false", "--quiet"]


def test_a_plugin_failing_mid_run_fails_its_jobs_with_its_reason_and_is_listed_failed(tmp_path, capsys):
    """A plug-in whose server_update raises in round 5 (round 1, tried up front, works): the sweep exits 2 with
    one line naming the job and the plug-in's reason, the job keeps rounds 0-4, the page lists it as failed,
    unranked."""
    sweep = tmp_path / "sw"
    code, _, err = cli(["sweep", *QUICK, "--axis", "algo=fedavg,tests.plugin_fixtures:RaisesInRound5",
                        "--out", str(sweep)], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert ("1 of 2 jobs failed: algo=tests.plugin_fixtures_RaisesInRound5: invalid algo='tests.plugin_fixtures:"
            "RaisesInRound5': its server_update raised RuntimeError: the plug-in's own bug in round 5") in err
    job = next(p for p in (sweep / "jobs").iterdir() if "RaisesInRound5" in p.name)
    assert sorted(set(pd.read_csv(job / "metrics.csv")["round"])) == [0, 1, 2, 3, 4]
    assert json.loads((job / "summary.json").read_text())["status"] == "failed"
    code, _, err = cli(["report", str(sweep), "--no-plot", "--html"], capsys)
    assert code == 0, err
    cells = pd.read_csv(sweep / "report" / "cells.csv")
    plugin, fedavg = cells[cells["algo"] != "fedavg"].iloc[0], cells[cells["algo"] == "fedavg"].iloc[0]
    assert plugin["status"].startswith("failed: invalid algo='tests.plugin_fixtures:RaisesInRound5'")
    assert np.isnan(plugin["rank"]) and fedavg["rank"] == 1


@pytest.mark.parametrize("plugin,needle", [
    ("ServerDropsPairs", "its server_update returned x of shape [2, "),
    ("PromotesToFloat64", "its server_update returned server state 'm' of dtype torch.float64, expected "
                          "torch.float32"),
])
def test_sweeps_and_atlases_try_plugins_up_front_as_pair_does(tmp_path, capsys, plugin, needle):
    for args in (["sweep", *QUICK, "--axis", f"algo=fedavg,tests.plugin_fixtures:{plugin}"],
                 ["atlas", "--suite", "ci", "--algos", f"fedavg,tests.plugin_fixtures:{plugin}", "--no-projection",
                  "--quiet"]):
        out = tmp_path / args[0]
        code, _, err = cli([*args, "--out", str(out)], capsys)
        assert code == 2 and err.count("\n") == 1 and needle in err and "(sweep job " in err, err
        assert not out.exists()


def test_a_job_whose_metrics_hold_only_the_header_is_reported_empty(tmp_path, capsys):
    sweep = tmp_path / "sw"
    assert cli(["sweep", *QUICK, "--axis", "lr=0.05,0.1", "--out", str(sweep)], capsys)[0] == 0
    metrics = sweep / "jobs" / "lr=0.1" / "metrics.csv"
    metrics.write_text(metrics.read_text().splitlines()[0] + "\n")
    code, _, err = cli(["report", str(sweep), "--no-plot", "--html"], capsys)
    assert code == 0, err
    cells = pd.read_csv(sweep / "report" / "cells.csv").set_index("name")
    assert cells.loc["FedAvg, lr 0.1", "status"] == "failed: empty: metrics.csv holds no round, only its header"
    assert cells.loc["FedAvg, lr 0.05", "rank"] == 1


def test_a_page_of_jobs_that_all_failed_before_their_first_round_lists_them(tmp_path, capsys):
    sweep = tmp_path / "sw"
    assert cli(["sweep", *QUICK, "--axis", "lr=0.05,0.1", "--out", str(sweep)], capsys)[0] == 0
    for metrics in (sweep / "jobs").glob("*/metrics.csv"):
        metrics.unlink()
    code, _, err = cli(["report", str(sweep), "--no-plot", "--html", "--out", str(tmp_path / "rep")], capsys)
    assert code == 2 and "no job has metrics yet" in err  # the report refuses: there is nothing to show
    from stabkit.atlas.cells import cell_table, read_jobs

    cells = cell_table(read_jobs(sweep))  # the atlas's table of such a sweep: every cell listed, none ranked
    assert list(cells["status"]) == ["failed: done", "failed: done"] and cells["rank"].isna().all()


def test_reading_the_jobs_in_worker_processes_gives_the_same_jobs(atlas_dir):
    """A tuned atlas reads hundreds of jobs (0.2-0.3 s each): its workers read them in parallel, to the same
    results as one process reading them in order."""
    from stabkit.atlas.cells import read_jobs

    alone, parallel = read_jobs(atlas_dir / "sweep"), read_jobs(atlas_dir / "sweep", workers=2)
    assert [j.id for j in parallel] == [j.id for j in alone] and len(alone) == 18
    for a, b in zip(alone, parallel):
        assert np.array_equal(a.curves, b.curves, equal_nan=True) and a.bounds == b.bounds and a.final.keys() == b.final.keys()
        assert all(np.array_equal(a.final[k], b.final[k], equal_nan=True) for k in a.final)
        assert a.G == b.G or np.isnan(a.G) and np.isnan(b.G)


def test_perturbation_columns_add_the_leave_one_out_neighbours():
    """``--perturbs``: a table per task and perturbation; remove-client / remove-sample take the pairs of client /
    sample, and the page says the suite ran with other columns."""
    from stabkit.atlas.suites import get_suite, scaled, suite_rows
    from stabkit.errors import ConfigError

    suite = scaled(get_suite("small"), perturbs="client,sample,remove-client,remove-sample")
    rows = suite_rows(suite, ["fedavg"])
    assert [(r["task"], r["perturb"], r["pairs"]) for r in rows[:4]] == [
        ("digits", "client", 8), ("digits", "sample", 32), ("digits", "remove-client", 8), ("digits", "remove-sample", 32)]
    assert "perturbations client, sample, remove-client, remove-sample" in suite.description
    assert scaled(get_suite("small"), perturbs="client,sample") is get_suite("small")
    for bad in ("client,bogus", "client,client", ""):
        with pytest.raises(ConfigError, match=f"invalid perturbs={bad!r}"):
            scaled(get_suite("small"), perturbs=bad)
