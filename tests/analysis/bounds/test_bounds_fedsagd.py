"""FedSAGD-paper stability bounds (Table 1, Theorem C.12; docs/bounds-reference.md): the bounds evaluated at the
paper's CIFAR-10 and EMNIST settings and in a small-problem regime (Theta = 1), recursion == closed form, conditions."""
import numpy as np
import pytest

from stabkit.algorithms import resolve_hp
from stabkit.analysis.bounds import Setting, bounds_for, registered
from stabkit.analysis.bounds.fedsagd import FORMS, evaluate, fedsagd_constants, round_coeffs, theta_lemma_c1
from stabkit.analysis.bounds.fedsagd_local import LOCAL_ALGOS, local_bound

CIFAR = dict(beta=0.9, lam=0.01, mu=0.001)  # the paper's CIFAR-10 setting: eta_l = 0.1, K = 25
SMALL = dict(beta=0.9, lam=1.0, mu=0.1)  # a small-problem regime (1/Gamma ~ 25 rounds): eta_l = 0.05, K = 10
FEDCM = dict(alpha=0.1, server="gradient")  # the analysed parametrisation (eta_g in gradient units)


def sig4(x, ref):
    assert x == pytest.approx(ref, rel=5e-4 if abs(ref) < 1e3 else 5e-5, abs=0), (x, ref)


def last(algo, K, T, eta_l, **kw):
    return evaluate(algo, K, T, eta_l, theta=1.0, **kw)["bound_global"][-1]


# ---------------------------------------------------------------------------- the paper's CIFAR-10 / EMNIST settings

def test_cifar_constants_and_T2000():  # Gamma, zeta of Theorem C.12 / eq. (3)
    k = fedsagd_constants(0.1, 25, 0.01, 0.001)
    sig4(float(k["Gamma"]), 2.46728e-3)
    sig4(float(k["zeta"]), 2.46728)
    r = evaluate("fedsagd", 25, 2000, 0.1, theta=1.0, form="theorem", **CIFAR)
    sig4(r["bound_global"][-1], 3772.83)
    sig4(r["closed_form"][-1], 3772.83)
    sig4(r["derived"]["time_constant"], 405.3)
    sig4(r["derived"]["asymptote"], 3800)
    sig4(last("fedsagd", 25, 2000, 0.1, form="table1", **CIFAR), 139013)
    sig4(last("fedavg", 25, 2000, 0.1), 10000)
    sig4(last("fedprox", 25, 2000, 0.1, lam=0.001), 9988.0)
    sig4(last("fedavg", 25, 2000, 0.1, form="wd", w=1e-3), 1986.5)
    # Table 1 replaces Theorem C.12's zeta by 1/(lambda + mu): 36.85 times looser here (docs/errata.md)
    sig4(139013.42 / 3772.83, 36.85)


def test_cifar_T500_and_crossover():  # theorem form above FedAvg's until T = 578
    sig4(last("fedsagd", 25, 500, 0.1, form="theorem", **CIFAR), 2695.0)
    sig4(last("fedavg", 25, 500, 0.1), 2500)
    r = evaluate("fedsagd", 25, 2000, 0.1, theta=1.0, form="theorem", **CIFAR)
    assert r["derived"]["crossover_T_vs_fedavg"] == 578
    fs, fa = r["bound_global"], evaluate("fedavg", 25, 2000, 0.1, theta=1.0)["bound_global"]
    assert fs[577] >= fa[577] and fs[578] < fa[578]
    # Table-1 form exceeds FedAvg for all T <= 2000
    t1 = evaluate("fedsagd", 25, 2000, 0.1, theta=1.0, form="table1", **CIFAR)["bound_global"]
    assert np.all(t1[1:] > fa[1:])


def test_emnist_setting():  # the paper's EMNIST setting: eta_l = 0.001, K = 40
    r = evaluate("fedsagd", 40, 2000, 0.001, theta=1.0, form="theorem", **CIFAR)
    sig4(r["bound_global"][-1], 292.1)
    sig4(last("fedavg", 40, 2000, 0.001), 160)
    assert r["derived"]["crossover_T_vs_fedavg"] == 36439


# ---------------------------------------------------------------------------- small-problem regime

def test_small_problem_fedsagd():  # Theorem C.12 and Table 1 forms
    k = fedsagd_constants(0.05, 10, 1.0, 0.1)
    sig4(float(k["q"]), 0.567960)
    sig4(float(k["Gamma"]), 0.0392763)
    sig4(float(k["zeta"]), 0.392763)
    a, b, _ = round_coeffs("fedsagd", "theorem", 10, 0.05, 1.0, **SMALL)
    sig4(a[0], 0.960724)
    sig4(b[0], 1.492500)
    th = evaluate("fedsagd", 10, 100, 0.05, theta=1.0, form="theorem", **SMALL)
    t1 = evaluate("fedsagd", 10, 100, 0.05, theta=1.0, form="table1", **SMALL)
    for T, v_th, v_t1 in zip((1, 10, 50, 100), (1.4925, 12.545, 32.875, 37.309), (3.4545, 29.037, 76.092, 86.355)):
        sig4(th["bound_global"][T], v_th)
        sig4(t1["bound_global"][T], v_t1)
    sig4(th["derived"]["asymptote"], 38.0)
    sig4(th["derived"]["time_constant"], 25.46)


@pytest.mark.parametrize("algo,kw,per_T", [
    ("fedavg", {}, 1.0), ("fedprox", dict(lam=1.0), 0.80253), ("feddyn", dict(lam=1.0), 1.60505),
    ("scaffold", {}, 3.0), ("fedanag", dict(beta=0.9), 10.0), ("fedacg", dict(lam=0.9, beta_acg=0.0), 11.0),
    ("fedadam", dict(tau=1e-3), 1000.0), ("fedcm", FEDCM, 2.0)])
def test_small_problem_linear(algo, kw, per_T):  # Table 1's O(T) rows
    v = evaluate(algo, 10, 100, 0.05, theta=1.0, **kw)["bound_global"]
    for T in (1, 10, 50, 100):
        sig4(v[T], per_T * T)


def test_small_problem_wd_and_local():  # FedAvg + weight decay, local bounds at k = K
    v = evaluate("fedavg", 10, 100, 0.05, theta=1.0, form="wd", w=0.1)["bound_global"]
    for T, ref in zip((1, 10, 50, 100), (0.9778, 7.885, 18.369, 19.867)):
        sig4(v[T], ref)
    loc = {"fedavg": ({}, 1.0), "fedprox": (dict(lam=1.0), 0.80253), "feddyn": (dict(lam=1.0), 1.60505),
           "fedsagd": (SMALL, 1.49250), "fedanag": (dict(beta=0.9), 10.0), "fedlnag": (dict(beta=0.9), 0.41381)}
    for algo, (kw, ref) in loc.items():
        values, closed, _ = local_bound(algo, 10, 0.05, 1.0, "paper", **kw)
        sig4(values[-1], ref)
        sig4(closed[-1], ref)
    # FedLNAG tight global per-round increment = its local k = K value
    sig4(last("fedlnag", 10, 1, 0.05, form="tight", beta=0.9), 0.41381)


# ---------------------------------------------------------------------------- recursion == closed form

HP = dict(beta=0.9, lam=0.5, mu=0.1, tau=1e-2, alpha=0.2, beta_acg=0.0, server="gradient", w=0.05)


@pytest.mark.parametrize("algo", LOCAL_ALGOS)
@pytest.mark.parametrize("eta", [1.0, 0.7, 1.3])
def test_recursion_matches_closed_form(algo, eta):  # the per-round recursion equals its closed form
    for form in FORMS[algo]:
        if form == "rigorous":
            continue
        r = evaluate(algo, 7, 60, 0.03, eta=eta, theta=1.7, form=form, **HP)
        if r["closed_form"] is None:
            continue
        np.testing.assert_allclose(r["bound_global"], r["closed_form"], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("algo", LOCAL_ALGOS)
@pytest.mark.parametrize("form", ["paper", "l1"])
def test_local_recursion_matches_closed_form(algo, form):  # local stability (Figure 1), paper and L1 forms
    values, closed, _ = local_bound(algo, 12, 0.04, 1.3, form, beta=0.8, lam=0.7, mu=0.2, alpha=0.3)
    np.testing.assert_allclose(values, closed, rtol=1e-9, atol=1e-12)
    assert values[0] == 0
    if form == "l1":  # L1 bounds never exceed the paper's (shared server state)
        assert np.all(values <= local_bound(algo, 12, 0.04, 1.3, "paper", beta=0.8, lam=0.7, mu=0.2,
                                            alpha=0.3)[0] + 1e-12)


def test_global_lr_extension_and_schedule():  # a -> |1 - eta| + eta a, b -> eta b (docs/errata.md)
    a, b, _ = round_coeffs("fedsagd", "theorem", 10, 0.05, 1.0, **SMALL)
    a2, b2, c2 = round_coeffs("fedsagd", "corrected", 10, 0.05, 1.0, eta=1.5, **SMALL)
    assert a2[0] == pytest.approx(0.5 + 1.5 * a[0]) and b2[0] == pytest.approx(1.5 * b[0])
    # lr schedule: a_t, b_t follow eta_l(t)
    lr = 0.05 * 0.99 ** np.arange(5)
    a3, b3, _ = round_coeffs("fedsagd", "theorem", 10, lr, 1.0, **SMALL)
    k = fedsagd_constants(lr, 10, 1.0, 0.1)
    np.testing.assert_allclose(a3, 1 - k["Gamma"])
    np.testing.assert_allclose(b3, 3.8 * k["zeta"])
    # FedCM general step: c = 1/(eta_l K) = 2 here -> a = |1 - 2| + 2 = 3
    a4, b4, _ = round_coeffs("fedcm", "corrected", 10, 0.05, 1.0, **FEDCM)
    assert a4[0] == pytest.approx(3.0) and b4[0] == pytest.approx(2.0)
    a5, _, _ = round_coeffs("fedcm", "corrected", 10, 0.2, 1.0, **FEDCM)  # eta_l K = 2 >= 1: a = 1 (paper's step)
    assert a5[0] == pytest.approx(1.0)


def test_lemma_c1_and_rigorous():  # Lemma C.1; the measured ||v_t|| in place of Theta (docs/errata.md)
    assert theta_lemma_c1(1.0, 2.0, 3.0) == pytest.approx(np.sqrt(1 + 8 + 6))
    r = evaluate("fedsagd", 10, 5, 0.05, sigma_l=0.6, sigma_g=0.0, phi=0.32, form="theorem", **SMALL)
    assert r["bound_global"][1] == pytest.approx(1.4925)  # Theta = sqrt(0.36 + 0.64) = 1
    v = np.full(5, 2.0)  # ||v|| + ||v'|| = 2 Theta: rigorous == theorem
    rr = evaluate("fedsagd", 10, 5, 0.05, theta=1.0, form="rigorous", v_sum=v, **SMALL)
    np.testing.assert_allclose(rr["bound_global"], r["bound_global"])
    h = np.full(5, 2.0)  # FedDyn rigorous with ||h_i|| + ||h'_j|| = 2 Theta is the paper's 4/lambda form
    np.testing.assert_allclose(evaluate("feddyn", 10, 5, 0.05, theta=1.0, form="rigorous", h_sum=h, lam=1.0)
                               ["bound_global"], evaluate("feddyn", 10, 5, 0.05, theta=1.0, lam=1.0)["bound_global"])


# ---------------------------------------------------------------------------- conditions flip

def test_conditions_flip():  # Theorem C.12's mu > 0 and 0 < eta_l (lambda + mu) <= 1
    ok = evaluate("fedsagd", 10, 5, 0.05, theta=1.0, form="theorem", **SMALL)["conditions"]
    assert all(ok.values())
    bad = evaluate("fedsagd", 10, 5, 0.05, theta=1.0, form="theorem", beta=0.9, lam=1.0, mu=0.0)
    assert not bad["conditions"]["mu > 0 (else Gamma = 0: no saturation)"]
    assert bad["bound_global"][-1] == pytest.approx(5 * 3.8 * 0.05 * 10 * (1 - 0.95 ** 10) / 0.5)  # linear
    big = evaluate("fedsagd", 10, 5, 1.0, theta=1.0, form="theorem", **SMALL)["conditions"]
    assert not big["0 < eta_l (lambda + mu) <= 1"]
    eta = evaluate("fedsagd", 10, 5, 0.05, eta=0.5, theta=1.0, form="theorem", **SMALL)["conditions"]
    assert not eta["global lr eta = 1 (the paper's stability analysis)"]
    assert all(evaluate("fedsagd", 10, 5, 0.05, eta=0.5, theta=1.0, form="corrected", **SMALL)["conditions"].values())
    cm = evaluate("fedcm", 10, 5, 0.05, theta=1.0, **FEDCM)["conditions"]  # eta_l K = 0.5 < 1
    assert not cm["eta_l K >= 1 (the paper's coefficient 1 - 1/(eta_l K) >= 0)"]
    assert all(evaluate("fedcm", 10, 5, 0.2, theta=1.0, **FEDCM)["conditions"].values())
    assert not evaluate("fedavg", 10, 5, 0.05, eta=2.0, theta=1.0)["conditions"][
        "global lr eta = 1 (the paper's stability analysis)"]
    assert not evaluate("fedadam", 10, 5, 0.05, eta=2.0, theta=1.0, tau=1e-3)["conditions"][
        "eta <= 1 (the printed bound drops the global lr)"]
    wd = evaluate("scaffold", 10, 5, 0.05, theta=1.0, w=1e-3)["conditions"]
    assert not all(wd.values())
    assert all(evaluate("fedprox", 10, 5, 0.05, theta=1.0, lam=1.0, w=1e-3)["conditions"].values())


# ---------------------------------------------------------------------------- registered wrappers

def _setting(algo, hp, T=30, wd=0.0, eta=1.0, measured=None, lr=None):
    """A run's setting: its hp resolved as config.json records them (hp_resolved)."""
    return Setting(algo=algo, hp=resolve_hp(algo, hp), K=10, T=T, s=4, M=20, n=50, b=10,
                   lr=np.full(T, 0.05) if lr is None else lr, global_lr=eta, weight_decay=wd,
                   constants={"theta_max": 1.0}, measured=measured or {})


def test_registered_every_algorithm():
    reg = registered()
    for algo in LOCAL_ALGOS:
        assert "fedsagd.global" in reg[algo] and "fedsagd.local" in reg[algo]
    s = _setting("fedsagd", dict(beta=0.9, beta_local=None, lam=1.0, mu=0.1),
                 measured={"state_norm_sum/v": np.full(31, 2.0), "theta_t": np.r_[np.nan, np.ones(30)]})
    bs = {b.name: b for b in bounds_for(s)}
    th = bs["fedsagd:fedsagd.theorem"]
    sig4(th.values[10], 12.545)
    np.testing.assert_allclose(th.values, th.closed_form, rtol=1e-9)
    np.testing.assert_allclose(bs["fedsagd:fedsagd.rigorous"].values, th.values)
    np.testing.assert_allclose(bs["fedsagd:fedsagd.theorem.theta_t"].values, th.values)
    assert th.valid and th.derived["crossover_T_vs_fedavg"] == 23
    sig4(bs["fedsagd:fedsagd.local_paper"].values[-1], 1.4925)
    # no measured v: the rigorous form is an explicit failed placeholder
    bs2 = {b.name: b for b in bounds_for(_setting("fedsagd", dict(beta=0.9, lam=1.0, mu=0.1)))}
    assert not bs2["fedsagd:fedsagd.rigorous"].valid
    # FedAvg + weight decay control only with weight decay; FedDyn without h norms: paper form + note
    names = [b.name for b in bounds_for(_setting("fedavg", {}, wd=0.1))]
    assert "fedsagd:fedavg.wd" in names
    assert "fedsagd:fedavg.wd" not in [b.name for b in bounds_for(_setting("fedavg", {}))]
    dyn = {b.name: b for b in bounds_for(_setting("feddyn", dict(lam=1.0, server="analysis")))}
    assert "fedsagd:feddyn.rigorous" not in dyn and "rigorous" in dyn["fedsagd:feddyn.paper"].note
    # lr schedule: no closed form, recursion uses lr[t]
    lr = 0.05 * 0.99 ** np.arange(30)
    b = {b.name: b for b in bounds_for(_setting("fedavg", {}, lr=lr))}["fedsagd:fedavg.paper"]
    assert b.closed_form is None and b.values[-1] == pytest.approx(2 * 10 * lr.sum())
    # every algorithm evaluates with its default hyperparameters
    for algo in LOCAL_ALGOS:
        bs = bounds_for(_setting(algo, {}))
        assert bs and not [b.note for b in bs if b.form == "unavailable" and b.name.startswith("fedsagd")]


@pytest.mark.parametrize("algo", ["fedprox", "feddyn", "fedsagd"])
def test_local_weight_decay_condition_includes_the_prox_weight(algo):
    """Weight decay only contracts a prox method's local step while eta_l (lambda + w) <= 1: here
    0.05 (15 + 6) > 1 although 0.05 * 6 <= 1, so every local bound (as every global one) is flagged."""
    key = "engine weight decay only contracts: eta_l (lambda + w) <= 1"
    hp = dict(lam=15.0, mu=0.0) if algo == "fedsagd" else dict(lam=15.0)
    bs = bounds_for(_setting(algo, hp, wd=6.0))
    local = [b for b in bs if b.quantity == "local_disc"]
    assert len(local) == 2 and all(b.conditions[key] is False for b in local)
    assert all(b.conditions[key] is False for b in bs if b.quantity == "disc" and key in b.conditions)
    ok = bounds_for(_setting(algo, dict(hp, lam=5.0), wd=6.0))  # 0.05 (5 + 6) = 0.55
    assert all(b.conditions[key] is True for b in ok if b.quantity == "local_disc")
