"""FedInit bounds (stabkit/analysis/bounds/fedinit.py) against the FedInit paper: Theorems 12, 15, 17 and 19, Table 3
and the divergence recursion of Lemmas 23 and 26 (docs/bounds-reference.md)."""
import numpy as np
import pytest

from stabkit.analysis.bounds import Setting, bounds_for
from stabkit.analysis.bounds import fedinit as fi

CONST = dict(L=2.0, sigma_l2_sample=0.49, sigma_g2=0.3, F0=1.5, G=3.0, U=2.0, L_G=1.2, a_int=1.5, b_int=1.2)


def setting(algo="fedinit", T=20, K=3, lr=0.01, hp=None, g=None, s=5, M=10, n=50, b=1):
    lr = np.full(T, lr) if np.ndim(lr) == 0 else np.asarray(lr)
    g = np.linspace(2.0, 0.5, T + 1) if g is None else g
    return Setting(algo=algo, hp=hp if hp is not None else {"beta": 0.05}, K=K, T=T, s=s, M=M, n=n, b=b, lr=lr,
                   constants=dict(CONST), measured={"grad_norm_sq": g})


def test_beta_thresholds():  # beta < 1/sqrt(141) (kappa_beta, Thm 1), 1/sqrt(189) (C_beta, Thm 17), 1/sqrt(39) (Thm 6)
    assert round(1 / np.sqrt(141), 4) == 0.0842
    assert round(1 / np.sqrt(189), 4) == 0.0727
    assert round(1 / np.sqrt(39), 3) == 0.160
    for beta in (0.0, 0.03, 0.07):
        assert fi.C_beta(beta) == pytest.approx(1 / (1 - 189 * beta ** 2), rel=1e-12)


def test_t0_star_balances_terms():  # Theorem 12: both terms equal at t0*, and eq. (8) is their sum
    T, N, U, K, C, S, sl, LG, L, c, beta = 1000.0, 5, 2.0, 3, 10, 50, 0.7, 1.2, 2.0, 0.05, 0.05
    k = fi.Thm12(N, U, K, C, S, sl, LG, L)
    t0 = fi.t0_star(T, k, c, beta, clamp=False)
    first = N * U * K * t0 / (C * S)
    second = 2 * sl * LG / ((1 + 2 * beta) * C * S * L) * (T / t0) ** (c * K * L)
    assert first == pytest.approx(second, rel=1e-10)
    assert fi.thm12(T, t0, k, c, beta) == pytest.approx(
        fi.eps_G_star(T, k, c, beta), rel=1e-10)
    te = fi.t0_star(T, k, c, beta, exact=True, clamp=False)
    ts = np.linspace(0.5 * te, 2 * te, 2001)
    vals = fi.thm12(T, ts, k, c, beta)
    assert fi.thm12(T, te, k, c, beta) <= vals.min() * (1 + 1e-9)
    assert te / t0 == pytest.approx((c * K * L) ** (1 / (1 + c * K * L)))


def test_schedule_form_constant_and_c_over_t():  # Theorem 12's proof before eta = c/t: any lr schedule
    args = (fi.Thm12(5, 2.0, 3, 10, 50, 0.7, 1.2, 2.0),)
    eta, T, t0 = 0.01, 100, 10
    v = fi.thm12_schedule(np.full(100, eta), T, t0, *args, 0.05)
    exp = 5 * 2.0 * 3 * t0 / 500 + 1.2 * np.exp(eta * 3 * 2.0 * (T - t0 + 2)) * 2 * 0.7 / (1.1 * 500 * 2.0)
    assert v == pytest.approx(exp, rel=1e-12)
    h = fi.thm12_schedule(np.full(100, eta), T, t0, *args, 0.05, honest=True)
    assert h > v  # honest variant (no premise) is worse
    assert fi.thm12_schedule(np.full(100, eta), T, t0, *args, 0.0, honest=True) == pytest.approx(
        fi.thm12_schedule(np.full(100, eta), T, t0, *args, 0.0))


def test_premise_flag_flips():  # Thm 12's premise (1 + 2 beta) phi(t) <= phi(t-1) holds only for beta ~ cKL/(2T^2)
    c, K, L = 0.1, 3, 2.0
    lr = c / np.arange(1, 51)
    assert fi.premise_ok(lr, K, L, 0.0, 1)
    assert not fi.premise_ok(lr, K, L, 0.1, 1)
    ratio = fi.phi_round(lr[-2], K, L) / fi.phi_round(lr[-1], K, L)
    assert fi.premise_ok(lr, K, L, (ratio - 1) / 2 * 0.99, 40)


def test_thm15_and_premise():
    bs = np.full(11, 0.05)
    v = fi.thm15(bs, 1.5, 1.2, 0.1, 1.2, 3, 10, 50)
    assert v == pytest.approx(np.exp(2 * 0.5) * 1.5 * 1.2 * 0.1 * 1.44 * 3 / (2 * 0.05 * 500))
    assert fi.thm15_premise(0.1 / np.arange(1, 11), 3, bs)
    assert not fi.thm15_premise(np.linspace(0.01, 0.1, 10), 3, bs)


def test_table3_reduces_to_sgd():  # Remark 13: K=1, N=1 reduces to SGD
    assert fi.table3_fedavg(100, 1, 1, 10, 50, 0.1, 2.0) == pytest.approx(fi.table3_sgd(100, 10, 50, 0.1, 2.0))


def test_divergence_recursion_equals_closed_form():  # forward form, constant lr and g -> geometric
    beta, eta, K, sl2, sg2, g = 0.05, 0.01, 3, 0.5, 0.3, 1.7
    D = fi.divergence_forward(np.full(40, eta), K, beta, sl2, sg2, np.full(41, g))
    a = 189 * beta ** 2
    b = 132 * eta ** 2 * K * (sl2 + 6 * K * sg2) + 804 * eta ** 2 * K ** 2 * g
    np.testing.assert_allclose(D, b * (a ** np.arange(41) - 1) / (a - 1), rtol=1e-9)
    # steady state b / (1 - 189 beta^2): the bound grows with beta
    assert D[-1] == pytest.approx(b / (1 - a), rel=1e-9)
    # literal (exact substitution) <= forward (simplified with eta K L <= 1) when eta K L <= 1
    lit = fi.divergence_literal(np.full(40, eta), K, 2.0, beta, sl2, sg2, np.full(41, g))
    assert np.all(lit <= D + 1e-15)
    it = fi.divergence_interpolation(np.full(40, eta), K, beta, 1.5, 1.2, np.full(41, g))
    a2, b2 = 39 * beta ** 2, 114 * 1.5 ** 2 * 1.2 ** 2 * eta ** 2 * K ** 2 * g
    np.testing.assert_allclose(it, b2 * (a2 ** np.arange(41) - 1) / (a2 - 1), rtol=1e-9)


def test_thm17_thm19():
    eta, T, K, N, L, beta = 0.001, 100, 3, 5, 2.0, 0.05
    lam = fi.lam_fedinit(eta, K, L, N, beta)
    assert 0 < lam < 0.5
    v = fi.thm17_avg(eta, T, K, N, L, beta, 1.5, 0.5, 0.3)
    kap = 8 + 78 * beta ** 2 * fi.kappa_beta(beta) ** 2
    Cb = 1 / (1 - 189 * beta ** 2)
    exp = eta * 804 * Cb * K * 1.5 / (lam * T) + eta ** 2 * Cb * (132 + 804 * kap / (lam * N)) * K * (0.5 + 6 * K * 0.3)
    assert v == pytest.approx(exp, rel=1e-12)
    z = fi.zeta_fedinit(eta, K, L, 1.5, 1.2, beta)
    assert fi.thm19_avg(eta, T, K, L, beta, 1.5, 1.5, 1.2) == pytest.approx(
        114 * fi.gamma_beta(beta) * 1.5 ** 2 * 1.2 ** 2 * eta * K * 1.5 / (z * T))


def test_registered_and_flags():
    names = {(b.name, b.form) for b in bounds_for(setting())}
    assert {("fedinit.thm12", f) for f in ("paper", "exact", "schedule", "honest")} <= names
    assert {("fedinit.divergence", f) for f in ("corrected", "paper", "interpolation")} <= names
    assert {("fedinit.thm15", "paper"), ("fedinit.thm17", "paper"), ("fedinit.thm19", "paper")} <= names
    fa = {(b.name, b.form) for b in bounds_for(setting("fedavg", hp={}))}
    assert ("fedinit.thm12", "paper") in fa and ("fedinit.thm15", "paper") not in fa
    div = lambda st: [b for b in bounds_for(st) if b.name == "fedinit.divergence" and b.form == "corrected"][0]
    good = div(setting(hp={"beta": 0.05}, lr=0.001))
    assert good.valid, good.failed
    bad = div(setting(hp={"beta": 0.1}, lr=0.5, s=10))
    for k in ("beta < 1/sqrt(141) ~ 0.0842 (kappa_beta)", "beta < 1/sqrt(189) ~ 0.0727 (C_beta)",
              "eta <= 1/(N K L) (Thm 1)", "eta <= 1/(K L) (Lemmas 22, 23)", "lambda > 0",
              "1 < N < C (partial participation)"):
        assert not bad.conditions[k], k
    # recursion with constant lr and constant g equals geometric closed form through the registered path
    st = setting(hp={"beta": 0.05}, g=np.full(21, 1.0))
    v = div(st).values
    a = 189 * 0.05 ** 2
    b = 132 * 1e-4 * 3 * (0.49 + 18 * 0.3) + 804 * 1e-4 * 9
    np.testing.assert_allclose(v, b * (a ** np.arange(21) - 1) / (a - 1), rtol=1e-9)
    t12 = [b for b in bounds_for(setting(lr=0.01 / np.arange(1, 21), hp={"beta": 0.0})) if b.name == "fedinit.thm12"]
    assert t12[0].conditions["premise_ok"] and t12[0].conditions["eta_t <= c/t (Thm 12 schedule)"]
    t12 = [b for b in bounds_for(setting(lr=0.01, hp={"beta": 0.1})) if b.name == "fedinit.thm12"]
    assert not t12[0].conditions["premise_ok"] and not t12[0].conditions["eta_t <= c/t (Thm 12 schedule)"]
