"""FedSWA / FedMoSWA bounds (stabkit/analysis/bounds/fedswa.py) against the FedSWA paper: Theorem 5.1, the recursion
of its proof (as printed, corrected, extended) and Table 1 (docs/bounds-reference.md); Hardt et al. reference."""
import numpy as np
import pytest

from stabkit.analysis.bounds import Setting, bounds_for
from stabkit.analysis.bounds import fedswa as fs
from stabkit.analysis.bounds import hardt as hr

CONST = dict(L=2.0, G=3.0, sigma_l2_sample=0.49, sigma_g2_mean=0.16, U=2.0)


def sig4(x):
    return float(f"{x:.4g}")


def setting(algo="fedswa", T=20, K=5, lr=None, hp=None, s=10, M=10, n=50, global_lr=1.0, measured=None, **c):
    lr = np.full(T, 1 / (2.0 * K * T) if lr is None else lr)
    return Setting(algo=algo, hp=hp if hp is not None else {"rho": 1.0, "alpha": 1.0, "gamma": 0.2, "option": "I"},
                   K=K, T=T, s=s, M=M, n=n, b=1, lr=lr, global_lr=global_lr, constants=dict(CONST, **c),
                   measured=measured or {})


def test_multipliers_section_2_10():  # Thm 5.1's c~ printed and corrected at K = 50, T = 1000, rho = 0.1
    assert sig4(fs.c_tilde_printed(50, 1000)) == pytest.approx(5.63e11, rel=1e-3)
    assert round(fs.c_tilde_corrected(50, 1000), 4) == 1.0010
    got = {K: fs.c_tilde_printed(K, 1000) for K in (1, 2, 5, 10, 20)}
    assert round(got[1], 3) == 1.001 and round(got[2], 3) == 1.002 and round(got[5], 3) == 1.016
    assert round(got[10], 2) == 1.51 and round(got[20], 1) == 525.5
    assert sig4(fs.fedsam_over_fedswa_ratio(50, 0.1)) == 1.789
    assert sig4(fs.lr_sum(1.0, 0.1, 50)) == 27.95
    assert sig4(np.exp(1 + 1 / 1000)) == 2.721
    assert fs.b_tilde_printed(50, 1000, 1.0, 1.0) - 1 < 1e-80  # "1 + O(1e-83)"
    # printed c~ increasing in K
    assert all(np.diff([fs.c_tilde_printed(K, 1000) for K in range(1, 60)]) > 0)


def test_c_tilde_from_step_sizes():  # Thm 5.1: eta = 1/(beta K T) gives c_t = 1 + 1/(KT), beta eta~ = 1/T
    beta, K, T = 2.0, 7, 30
    ax = fs.aux(np.full(K, 1 / (beta * K * T)), beta)
    ct = 1 + (1 + ax["c"]) ** (K - 1) * beta * ax["eta_tilde"]
    assert ct == pytest.approx(fs.c_tilde_printed(K, T), rel=1e-12)
    assert 1 + ax["c"] ** (K - 1) * beta * ax["eta_tilde"] == pytest.approx(fs.c_tilde_corrected(K, T), rel=1e-12)
    assert ax["D"].max() <= ax["c"] ** (K - 1) * ax["eta_tilde"] + 1e-15  # NC drift weight bound
    assert ax["W"] <= ax["eta_tilde"] * np.exp(beta * ax["eta_tilde"])
    assert ax["P"] <= np.exp(beta * ax["eta_tilde"])


def test_local_lr_schedule():  # Eq. (3): linear decay from eta_l to rho eta_l
    eta = fs.local_lrs(0.1, 0.1, 50)
    assert eta[0] == 0.1 and eta.sum() == pytest.approx(fs.lr_sum(0.1, 0.1, 50))
    assert eta[-1] == pytest.approx(0.1 * (0.1 + 0.9 / 50))


def test_printed_recursion_equals_unrolled_sum_and_theorem():  # as printed: eq. (31) == recursion; <= Thm 5.1
    beta, K, T, L, sg, s, m, n = 2.0, 5, 40, 3.0, 0.4, 0.7, 10, 50
    eta = np.full((T, K), 1 / (beta * K * T))
    pr = fs.SWAProblem(beta, L, s, sg, m, n)
    d = fs.recursion(eta, pr, form="paper")
    assert d[-1] == pytest.approx(fs.printed_unrolled(eta, pr), rel=1e-9)
    assert L * d[-1] <= fs.thm51(pr, T, K) * (1 + 1e-12)
    # corrected <= printed, FedMoSWA <= FedSWA
    dc = fs.recursion(eta, pr, form="corrected")
    assert np.all(dc <= d + 1e-15)
    assert fs.thm51(pr, T, K, mo=True) <= fs.thm51(pr, T, K)
    diff = fs.thm51(pr, T, K) - fs.thm51(pr, T, K, mo=True)
    assert diff == pytest.approx(2 * L / (m * n * beta) * np.exp(1 + 1 / T) * (fs.c_tilde_printed(K, T) - 1) * sg)
    # 1/(mn) scaling
    assert fs.thm51(pr._replace(m=2 * m), T, K) == pytest.approx(fs.thm51(pr, T, K) / 2)
    assert fs.thm51(pr, T, K, factor2=False) == pytest.approx(fs.thm51(pr, T, K) / 2)


def test_corrected_mo_differs_only_in_sigma_g():  # corrected recursion: FedMoSWA differs in the sigma_g term only
    beta, K, T, L, s, m, n = 2.0, 5, 10, 3.0, 0.7, 10, 50
    eta = np.full((T, K), 1 / (beta * K * T))
    a = fs.recursion(eta, fs.SWAProblem(beta, L, s, 0.0, m, n), form="corrected")
    b = fs.recursion(eta, fs.SWAProblem(beta, L, s, 0.0, m, n), form="corrected", mo=True, gamma=1.0, M0=0.0)
    # with sigma_g = 0 and M_t = G_t + sigma (gamma = 1) both equal
    np.testing.assert_allclose(a, b, rtol=1e-12)
    c = fs.recursion(eta, fs.SWAProblem(beta, L, s, 0.5, m, n), form="corrected", mo=True, gamma=1.0)
    e = fs.recursion(eta, fs.SWAProblem(beta, L, s, 0.5, m, n), form="corrected")
    assert np.all(c <= e) and c[-1] < e[-1]


def test_extension_alpha():  # extension (not in the paper): alpha = 1 equals corrected; alpha = 1.5 grows faster
    beta, K, T = 2.0, 5, 10
    eta = np.full((T, K), 0.01)
    b = fs.recursion(eta, fs.SWAProblem(beta, 3.0, 0.7, 0.4, 10, 50), form="corrected")
    c1 = fs.recursion(eta, fs.SWAProblem(beta, 3.0, 0.7, 0.4, 10, 50), form="extension", alpha=1.0)
    c15 = fs.recursion(eta, fs.SWAProblem(beta, 3.0, 0.7, 0.4, 10, 50), form="extension", alpha=1.5)
    np.testing.assert_allclose(b, c1, rtol=1e-12)
    assert np.all(c15[1:] > b[1:])


def test_strongly_convex_contracts():
    eta = np.full((30, 5), 0.01)
    sc = fs.recursion(eta, fs.SWAProblem(2.0, 3.0, 0.7, 0.4, 10, 50), form="corrected", mu=0.5)
    nc = fs.recursion(eta, fs.SWAProblem(2.0, 3.0, 0.7, 0.4, 10, 50), form="corrected")
    assert np.all(sc <= nc)


def test_registered_closed_form_and_conditions():
    bs = bounds_for(setting())
    forms = {(b.name, b.form) for b in bs}
    assert {("fedswa.recursion", f) for f in ("paper", "corrected", "extension")} <= forms
    assert {("fedswa.thm51", f) for f in ("paper", "corrected", "table1")} <= forms
    for b in bs:
        if b.closed_form is not None:
            np.testing.assert_allclose(b.values, b.closed_form, rtol=1e-9)
    rec = [b for b in bs if b.name == "fedswa.recursion" and b.form == "paper"][0]
    assert rec.closed_form is not None and rec.valid, rec.failed
    bad = [b for b in bounds_for(setting(s=5, lr=0.1, hp={"rho": 0.1, "alpha": 1.5, "gamma": 0.2, "option": "II"},
                                         algo="fedmoswa")) if b.name == "fedswa.recursion" and b.form == "paper"][0]
    for k in ("full participation s == M (proofs)", "alpha_eff == 1 (proofs use plain averaging)",
              "eta_k^t <= 1/(beta K T) (Thm 5.1)", "Option I control variate (proofs)"):
        assert not bad.conditions[k], k
    for algo in ("fedmoswa", "fedmo", "fedavg"):
        assert {"fedswa.recursion", "fedswa.thm51"} <= {b.name for b in bounds_for(setting(algo))}
    sc = {b.name for b in bounds_for(setting(mu_sc=0.5))}
    assert "fedswa.recursion_sc" in sc


def test_hardt_reference():  # Hardt et al. 2016 Thm 3.8, 3.12
    assert hr.nonconvex(1000, 500, 3.0, 2.0, 0.1, U=1.0) == pytest.approx(hr.nonconvex_paper(1000, 500, 3.0, 2.0, 0.1))
    v = hr.convex(np.full(10, 0.1), 3.0, 100)
    assert v[-1] == pytest.approx(2 * 9 / 100 * 1.0)
    st = Setting(algo="fedavg", hp={}, K=2, T=5, s=10, M=10, n=50, b=1, lr=np.full(5, 0.01),
                 constants=dict(CONST))
    hb = [b for b in bounds_for(st) if b.name == "hardt.sgd"]
    assert {b.form for b in hb} == {"convex", "nonconvex"}
    cv = [b for b in hb if b.form == "convex"][0]
    assert cv.values[-1] == pytest.approx(2 * 9 / 500 * 0.01 * 10)
    assert not cv.conditions["loss convex (constants['convex'])"]
