"""Libra bounds (stabkit/analysis/bounds/libra.py) against the Libra paper: the stability recursions of Lemma 6 and
App. D, Theorems 1-4, Corollary 1 and the conditions they need (docs/bounds-reference.md)."""
import numpy as np
import pytest

from stabkit.analysis import excess_risk as er
from stabkit.analysis.bounds import Setting, bounds_for
from stabkit.analysis.bounds import libra as lb

CONST = dict(L=2.0, sigma_l2=0.5, sigma_g2=0.3, F0=1.5, mu_pl=0.25, G=3.0, U=2.0)
PR = lb.Problem(L=2.0, K=5, sigma_l2=0.5, sigma_g2=0.3, b=10, n_total=1000)


def setting(algo="fedavg", T=30, K=3, lr=None, global_lr=1.0, hp=None, measured=None, s=10, M=10, n=100, b=10,
            options=None):
    lr = np.full(T, 0.03 if lr is None else lr) if np.ndim(lr) == 0 else np.asarray(lr)
    return Setting(algo=algo, hp=hp or {}, K=K, T=T, s=s, M=M, n=n, b=b, lr=lr, global_lr=global_lr,
                   constants=dict(CONST), measured=measured or {}, options=options or {})


def test_r1_recursion_equals_closed_form():  # S-R1 (Lemma 6, Young's inequality corrected), eta_g = 1
    s = lb.stability_r1(np.full(40, 0.01), 1.0, PR)
    cf = lb.stability_r1_closed(40, 0.01, PR)
    np.testing.assert_allclose(s, cf, rtol=1e-9)


def test_registered_recursions_match_closed_forms():
    for b in bounds_for(setting()):
        if b.closed_form is not None:
            np.testing.assert_allclose(b.values, b.closed_form, rtol=1e-9, atol=0)
    libra = {(b.name, b.form) for b in bounds_for(setting()) if b.name.startswith("libra.")}
    # every Libra bound of server SGD; Corollary 1 needs the measured s_t and g_t, which this setting lacks
    assert libra == {("libra.stability", "paper"), ("libra.stability", "corrected"), ("libra.thm2", "paper"),
                     ("libra.thm2", "corrected"), ("libra.step3", "paper"), ("libra.grad_norm", "paper"),
                     ("libra.e_min", "paper"), ("libra.e_min", "corrected"), ("libra.rate", "rate"),
                     ("libra.excess_risk", "unavailable")}


def test_r1_reduces_to_lemma6_minimised_over_p():  # Lemma 6's proof: S-R1 is Young's bound minimised over p
    s_t, eg, p0, n0 = 0.7, 0.4, 1.3, 0.05
    ps = np.logspace(-4, 4, 20001)
    brute = np.min((1 + ps) * (1 - eg) ** 2 * s_t + (1 + 1 / ps) * eg ** 2 * (p0 * s_t + n0))
    closed = ((1 - eg) * np.sqrt(s_t) + eg * np.sqrt(p0 * s_t + n0)) ** 2
    assert closed == pytest.approx(brute, rel=1e-6)


def test_fosm_reduces_to_server_sgd_at_beta0():  # Algorithm 1 (ii) -> (i); eq. (25) with beta=0, nu=1, eta_g=1 -> S-R1
    a = lb.stability_fosm(np.full(20, 0.01), 1.0, PR, beta=0.0, nu=1.0)
    b = lb.stability_r1(np.full(20, 0.01), 1.0, PR)
    np.testing.assert_allclose(a, b, rtol=1e-12)
    a3 = lb.stability_fosm(np.full(20, 0.01), 1.0, PR, beta=0.5, nu=0.5, three=True)
    a1 = lb.stability_fosm(np.full(20, 0.01), 1.0, PR, beta=0.5, nu=0.5)
    assert np.all(a3 >= a1)


def test_fosm_q_threshold_and_printed_psi_beta_negative():  # App. D: q = 2 beta (1 + beta) < 1 for beta < 0.366
    beta = (np.sqrt(3) - 1) / 2
    assert round(beta, 4) == 0.3660
    assert 2 * beta * (1 + beta) == pytest.approx(1.0)
    assert lb.fosm_closed(10, 1.5, 1.0, 0.5, 0.01, 0.2, 1.0, factor="printed") < 0
    assert lb.fosm_closed(10, 1.5, 1.0, 0.5, 0.01, 0.2, 1.0, factor="geometric") > 0
    assert lb.geometric_sum(1.0, 7) == 7


def test_psi0_below_2_in_lemma5_window():  # Lemma 5: eta_l <= 1/(8KL) => psi0 = (1 + 4 eta_l L)^K <= 2
    for K in (1, 5, 50):
        assert lb.psi0(1 / (8 * K * 2.0), 2.0, K) <= 2.0


def test_thm2_safe_vs_paper():  # Thm 2's tail sum from tau = 1: safe constant c zeta(1 + c psi) >= 1/psi
    p, ps, c = 1.6, 3.0, 0.4
    assert lb.thm2_safe(100, p, ps, c) >= lb.thm2_paper(100, p, ps, c)


def test_lemma1_and_e_min():  # Lemma 1 (step-size tuning) and the minimum excess risk of eq. (23)
    val, eta = lb.lemma1_opt(1.0, 2.0, 3.0, 4.0, 100)
    assert val == pytest.approx(2 * np.sqrt(0.02) + 2 * 3 ** (1 / 3) * 0.01 ** (2 / 3) + 0.04)
    assert eta == pytest.approx(min(0.25, np.sqrt(1 / 200), (1 / 300) ** (1 / 3)))
    r = lb.e_min_sgd(100, 1e-4, 1.0, lb.Problem(2.0, 2, 0.5, 0.3, 10, 1000), lb.Risk(1.0, 2.0, 0.1))
    assert r["rho"] > 0 and np.isfinite(r["value"])
    r2 = lb.e_min_sgd(100, 1e-4, 1.0, lb.Problem(2.0, 2, 0.5, 0.3, 10, 1000),
                      lb.Risk(1.0, 2.0, 0.1, paper_literal=True))
    assert r2["value"] != r["value"]


def test_conditions_flip():  # Lemmas 2, 5, 7, Theorems 2-4 and eq. (25)
    ok = setting(K=2, lr=1 / (12 * 2 * 2.0), global_lr=1 / 480.0 * 11, T=1, b=10, n=100, options={"c": 0.5})
    bad = setting(K=2, lr=0.5, T=30)
    cb = [b for b in bounds_for(ok) if b.name == "libra.stability" and b.form == "paper"][0].conditions
    assert cb["1/(16KL) <= eta_l <= 1/(8KL) (Lemmas 2, 5, 7)"]
    assert cb["eta_l eta_g <= 1/(480KL) (Thm 3, rho > 0)"]
    assert cb["b/n_i <= 1/2 (Lemma 5)"]
    cb = [b for b in bounds_for(bad) if b.name == "libra.stability" and b.form == "paper"][0].conditions
    assert not cb["1/(16KL) <= eta_l <= 1/(8KL) (Lemmas 2, 5, 7)"]
    assert not cb["eta_l eta_g <= 1/(480KL) (Thm 3, rho > 0)"]
    assert not cb["eta_g^t <= sqrt(c/t) (Thm 2/4)"]  # constant eta_g, c = eta_g^2
    assert not setting(b=60, n=100).b / 100 <= 0.5
    fb = [b for b in bounds_for(setting("fosm", hp={"beta": 0.5, "nu": 10.0})) if b.name == "libra.stability"]
    assert not fb[0].conditions["eta_g nu <= 2(1+beta) (eq. 25)"]
    fb = [b for b in bounds_for(setting("fosm_ema", hp={"beta": 0.5})) if b.name == "libra.stability"]
    assert fb[0].derived["nu"] == 0.5 and fb[0].conditions["eta_g nu <= 2(1+beta) (eq. 25)"]


def test_gamma_optimised_corollary1():  # Theorem 1 / Corollary 1: min over gamma
    s, g, L, C = 0.3, 2.0, 1.5, 0.7
    gs = np.logspace(-3, 3, 200001)
    assert lb.corollary1(s, g, L, C, gs).min() == pytest.approx(lb.excess_risk_dynamics(s, g, L, C)["total"], rel=1e-7)
    d = lb.excess_risk_dynamics(np.array([s]), np.array([g]), L, C)
    assert d["total"][0] == pytest.approx(d["generalisation"][0] + d["optimisation"][0])
    assert d["generalisation"][0] == pytest.approx(L / 2 * s + np.sqrt(s * g))


def test_measurement_u_shape_overfits():
    t = np.arange(101.0)
    e = (t - 40) ** 2 / 1600 + 1.0
    assert er.minimum_excess_risk_round(e) == 40
    assert er.fitting_regime(e) == "over-fitting"
    # e from Corollary 1 with growing stability and decaying gradient norm: interior minimum
    s, g = 1e-3 * t ** 1.5, 5.0 / (1 + t)
    e2 = lb.excess_risk_dynamics(s, g, 2.0, 1.0)["total"]
    ts = er.minimum_excess_risk_round(e2)
    assert 0 < ts < 100 and er.fitting_regime(e2) == "over-fitting"
    fit = er.fit_excess_risk(0.5 * s + 2.0 * g, s, g)
    assert fit["phi1"] == pytest.approx(0.5) and fit["phi2"] == pytest.approx(2.0)
    assert not fit["degenerate"] and fit["on_bound"] == []
    assert fit["T_star"] == er.minimum_excess_risk_round(0.5 * s + 2.0 * g)
    assert 0 < fit["T_star"] < 100


def test_measurement_monotone_underfits_and_flat_is_benign():
    t = np.arange(101.0)
    e = 1.0 / (1 + 0.05 * t)
    assert er.minimum_excess_risk_round(e) == 100
    assert er.fitting_regime(e) == "under-fitting"
    flat = 1.0 + np.exp(-t / 5)
    assert er.fitting_regime(flat) == "benign"
    assert er.fitting_regime(np.ones(10)) == "benign"


def test_nnls_nonnegative():
    t = np.arange(50.0)
    s, g = t / 50, np.exp(-t / 10)
    fit = er.fit_excess_risk(2 * s - 0.5 * g, s, g)  # a negative phi2 is not allowed
    assert fit["phi1"] >= 0 and fit["phi2"] == 0
    assert fit["degenerate"] and fit["on_bound"] == ["phi2"] and fit["T_star"] is None
    lo, hi = fit["phi2.ci"]  # the unconstrained estimate -0.5 (exact data: a zero-width interval)
    assert lo == pytest.approx(-0.5) and hi == pytest.approx(-0.5)


def test_fit_with_the_stability_term_on_its_bound_is_degenerate_with_an_interval():
    """The demo's case: the excess risk falls like the gradient norm while s_t grows, so NNLS puts phi1 on 0.
    The fit is then g_t scaled (its argmin is the g_t curve's), so no T* is reported; the unconstrained
    interval of phi1 lies below 0 (the run's data ask for a negative stability coefficient)."""
    rng = np.random.default_rng(0)
    t = np.arange(101.0)
    s, g = 1e-2 * t, 5.0 / (1 + t) + 0.1
    e = 1.5 * g - 0.02 * s + 0.01 * rng.standard_normal(t.size)
    fit = er.fit_excess_risk(e, s, g, start=1)
    assert fit["phi1"] == 0 and fit["phi2"] > 1 and fit["degenerate"] and fit["on_bound"] == ["phi1"]
    assert fit["T_star"] is None
    lo, hi = fit["phi1.ci"]
    assert lo < -0.02 < hi < 0
    lo2, hi2 = fit["phi2.ci"]
    assert lo2 < 1.5 < hi2


def test_registered_excess_risk_on_measured_curves():
    t = np.arange(31.0)
    m = {"disc_sq": 1e-3 * t ** 1.5, "grad_norm_sq": 5.0 / (1 + t)}
    bs = {(b.name, b.form): b for b in bounds_for(setting(measured=m))}
    b = bs[("libra.excess_risk", "corrected")]
    np.testing.assert_allclose(b.values, lb.excess_risk_dynamics(m["disc_sq"], m["grad_norm_sq"], 2.0, 2.0)["total"])
    assert b.derived["regime"] in ("over-fitting", "under-fitting", "benign")
    assert ("libra.gen_gap", "corrected") in bs
    for algo, hp in (("fosm", {"beta": 0.3, "nu": 1.0}), ("fedavgm", {"beta": 0.3}), ("fosm_ema", {"beta": 0.3})):
        names = {x.name for x in bounds_for(setting(algo, hp=hp, measured=m))}
        assert {"libra.stability", "libra.fosm_closed", "libra.excess_risk", "libra.e_min", "libra.rate"} <= names


def test_s_r1_overflows_to_inf_not_nan():
    """With eta_g = 1 the (1 - eta_g) sqrt(s) term is 0 even after s overflows: the bound is inf (vacuous), not
    NaN (the demo's libra.stability corrected)."""
    with np.errstate(over="ignore"):  # as bounds_for evaluates every bound
        s = lb.stability_r1(np.full(400, 1.0), 1.0, lb.Problem(50.0, 10, 0.5, 0.3, 10, 1000))
    assert np.isinf(s[-1]) and not np.isnan(s).any() and np.isfinite(s[:5]).all()
