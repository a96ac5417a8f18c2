"""`stabkit bounds` on real paired runs: constants, fits, bounds vs measurements, Libra's T*, the CLI."""
import json

import numpy as np
import pytest

from stabkit import RunConfig, TaskOptions, run_pair
from stabkit.analysis.run_analysis import analyze
from stabkit.tasks import build_task
from stabkit_cli.main import main


@pytest.fixture(scope="module")
def small_fedsagd(tmp_path_factory):
    """FedSAGD in a small-problem regime (1/Gamma ~ 25 rounds): eta_l 0.05, K 10, beta 0.9, lam 1, mu 0.1."""
    out = tmp_path_factory.mktemp("runs") / "fedsagd"
    run_pair(RunConfig(algo="fedsagd", hp=dict(beta=0.9, lam=1.0, mu=0.1), task="synthetic", rounds=120, pairs=6,
                       local_steps=10, lr=0.05, local_rounds=(0, 60),
                       task_options=TaskOptions(clients=20, samples_per_client=60)), out=out)
    return analyze(out)


def test_quadratic_constants_match_the_closed_form(tmp_path):
    opts = TaskOptions(clients=10, samples_per_client=30)
    run_pair(RunConfig(task="quadratic", rounds=10, pairs=2, task_options=opts), out=tmp_path)
    est = json.loads((tmp_path / "constants.json").read_text())
    exact = build_task("quadratic", opts).constants
    assert est["L"] == pytest.approx(exact["L"], rel=0.05)
    # the shared Hessian makes grad F_i - grad f constant in x, so the estimate is exact up to float32
    assert est["sigma_g2"] == pytest.approx(exact["sigma_g2"], rel=0.05)
    assert est["theta_max"] > 0 and est["sigma_l2"] > 0 and est["G"] >= est["theta_max"] * 0.5


def test_fit_is_consistent_with_the_curve_and_rates_are_reported(small_fedsagd):
    a = small_fedsagd
    best = a.fit.fits[a.fit.best]
    assert best.r2 > 0.85  # a curve that plateaus early: R² is limited by the round-to-round noise
    curves = a.curves()
    resid = curves.mean(0) - best.predict(np.arange(curves.shape[1]))
    assert np.abs(resid).max() < 0.15 * curves.mean(0).max()
    for name, (lo, hi) in a.fit.ci[a.fit.best].items():
        assert lo <= best.params[name] <= hi
    row = a.summary_row()
    # both the fitted saturation rate and the predicted Gamma are reported, with their ratio
    assert row["Gamma"] == pytest.approx(0.0392763, rel=1e-4)  # Theorem C.12's Gamma at these settings
    assert row["rho/Gamma"] == pytest.approx(row["sat.rho"] / row["Gamma"])
    assert np.isfinite(row["sat.rho"]) and row["sat.rho.ci"][0] <= row["sat.rho"] <= row["sat.rho.ci"][1]


def test_measured_discrepancy_is_below_every_valid_bound(small_fedsagd):
    rows = small_fedsagd.bound_rows()
    valid = [r for r in rows if r["valid"] and r["quantity"] == "disc"]
    assert {r["form"] for r in valid} >= {"theorem", "rigorous", "table1"}
    for r in valid:
        assert r["holds"], r
        assert r["tightness_T"] >= 1.0
    tight = {r["form"]: r["tightness_T"] for r in valid if not r["bound"].endswith("theta_t")}
    assert tight["rigorous"] <= tight["theorem"] <= tight["table1"]  # measured ||v_t||; Table 1 looser than Thm C.12


def test_local_discrepancy_fits_per_logged_round(small_fedsagd):
    assert set(small_fedsagd.local_fits) == {0, 60}
    for fit in small_fedsagd.local_fits.values():
        assert fit.fits[fit.best].r2 > 0.9


def test_libra_finds_the_minimum_of_an_overfitting_run(tmp_path):
    """Few samples per client and many local steps: the test loss turns up early; T* is found before the
    end and within 15 rounds of the measured test-loss minimum (the fitted phi1 s_t + phi2 g_t form)."""
    cfg = RunConfig(algo="fedavg", task="synthetic", model="mlp", rounds=100, pairs=4, local_steps=50, lr=0.1,
                    batch_size=8, perturb="sample", clients_per_round=5,
                    task_options=TaskOptions(clients=10, samples_per_client=10, synthetic_alpha=0.5,
                                             synthetic_beta=0.5))
    run_pair(cfg, out=tmp_path)
    lib = analyze(tmp_path, bootstrap=0).libra
    assert 1 <= lib["test_loss_argmin"] < 50
    assert lib["T_star_fit"] < 100 and abs(lib["T_star_fit"] - lib["test_loss_argmin"]) <= 15
    assert lib["regime_fit"] == "over-fitting"
    assert 1 <= lib["T_star"] < 100  # Corollary 1 with estimated L, C: reported, not asserted near


def test_bounds_cli_table_csv_json_and_plots(small_fedsagd, capsys):
    path = str(small_fedsagd.path)
    main(["bounds", path, "--format", "table", "--bootstrap", "20"])
    out = capsys.readouterr().out
    assert "best law" in out and "saturating" in out and "fitted rho" in out and "Libra" in out
    main(["bounds", path, "--format", "csv", "--bootstrap", "0"])
    assert capsys.readouterr().out.splitlines()[0].startswith("run,label,algo")
    main(["bounds", path, "--format", "json", "--bootstrap", "0", "--plot"])
    payload = json.loads(capsys.readouterr().out)
    assert payload[0]["summary"]["algo"] == "fedsagd" and payload[0]["bounds"]
    for name in ("discrepancy", "local", "gap", "libra", "fit_table"):
        for ext in ("png", "pdf"):
            assert (small_fedsagd.path / "figures" / f"{name}.{ext}").stat().st_size > 1000


def test_bounds_cli_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bounds", str(tmp_path), "--format", "xml"])
    assert exc.value.code == 2 and "format='xml'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["bounds", str(tmp_path / "nope")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "metrics.csv" in err and len(err.strip().splitlines()) == 1


def test_holds_is_decided_where_the_bound_is_defined():
    """A bound with NaN/inf rounds: `holds` on the defined rounds only, the undefined ones counted with their
    cause; a bound defined nowhere has holds None and says why (libra.stability corrected on the demo)."""
    from pathlib import Path

    from stabkit.analysis.bounds import Bound, Setting
    from stabkit.analysis.run_analysis import Analysis

    measured = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    st = Setting(algo="fedavg", hp={}, K=1, T=5, s=1, M=1, n=1, b=1, lr=np.full(5, 0.1),
                 measured={"disc": measured})
    over = Bound("b.over", "fedavg", "disc", "paper", "", np.array([0.0, 2.0, 3.0, np.inf, np.inf, np.nan]))
    below = Bound("b.below", "fedavg", "disc", "paper", "", np.array([0.0, 2.0, 1.0, np.nan, 9.0, 9.0]))
    nowhere = Bound("b.nan", "fedavg", "disc", "unavailable", "", np.full(6, np.nan), note="constant 'L' missing")
    rows = {r["bound"]: r for r in Analysis(Path("r"), None, st, None, [over, below, nowhere]).bound_rows()}
    assert rows["b.over"]["holds"] is True and rows["b.over"]["undefined"] == 3
    assert rows["b.over"]["undefined_cause"] == ("overflows to inf from t = 3 (the recursion exceeds the float "
                                                 "range; vacuous there); NaN from t = 5 after the overflow "
                                                 "(inf·0 or inf − inf)")
    assert rows["b.below"]["holds"] is False and rows["b.below"]["undefined"] == 1
    assert rows["b.below"]["undefined_cause"] == "NaN from t = 3"
    assert rows["b.nan"]["holds"] is None and rows["b.nan"]["undefined"] == 5
    assert rows["b.nan"]["undefined_cause"] == "NaN at every round: constant 'L' missing"


def test_one_formatter_of_swept_values_in_legends_tables_and_reports():
    from stabkit.analysis.labels import distinct_labels, value_text
    from stabkit.atlas.names import setting_name

    shown = [value_text(v) for v in (None, float("nan"), np.float64(0.5), 0.1, 1e-5, 3, (0, 50), [1, 2], "x")]
    assert shown == ["default", "default", "0.5", "0.1", "1e-05", "3", "0,50", "1,2", "x"]
    assert setting_name({"algo": "fedavg", "lr": 0.1, "hp.beta": None}) == "FedAvg, lr 0.1, beta default"
    assert distinct_labels([{"algo": "fosm", "hp": {"beta": 0.5}}, {"algo": "fosm", "hp": {"beta": None}}]) == \
        ["fosm beta=0.5", "fosm beta=default"]


def test_bounds_on_a_removal_run_are_shown_as_not_covered_by_their_proofs(tmp_path):
    """Every printed proof is for replace-one neighbours: on a remove-client run each bound is still evaluated
    but carries the failed condition, so none is counted as a valid bound."""
    from stabkit.analysis.run_analysis import REMOVAL_NOT_COVERED
    cfg = RunConfig(algo="fedavg", task="quadratic", perturb="remove-client", rounds=12, pairs=2, local_steps=3,
                    clients_per_round=3, task_options=TaskOptions(clients=8, samples_per_client=20))
    run_pair(cfg, out=tmp_path / "remove")
    run_pair(cfg.replace(perturb="client", client_mode="population"), out=tmp_path / "replace")
    removal, replace = analyze(tmp_path / "remove", bootstrap=0), analyze(tmp_path / "replace", bootstrap=0)
    assert removal.bounds and [b.name for b in removal.bounds] == [b.name for b in replace.bounds]
    assert all(REMOVAL_NOT_COVERED in b.failed and not b.valid for b in removal.bounds)
    assert not any(REMOVAL_NOT_COVERED in b.conditions for b in replace.bounds)
    assert any(b.valid for b in replace.bounds) and removal.summary_row()["valid_bounds"] == 0
