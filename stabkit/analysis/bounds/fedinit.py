"""FedInit (Sun, Shen, Tao): uniform-stability bounds (Thms 12, 15), Table 3 rates, the divergence recursion and the
Theorem 17 / 19 averages (docs/bounds-reference.md).

Paper symbols -> stabkit: C = ``M`` (all clients), N = ``s`` (active per round), S = ``n`` (samples per client),
eta = ``setting.lr[t]`` (no separate global lr in the theory), beta = ``hp["beta"]`` (fedavg: 0),
sigma_l = sqrt(``sigma_l2_sample``) (per-sample std, Assumption 3), sigma_g^2 = ``sigma_g2``, L_G = ``L_G``,
U = ``U``, D = ``F0``, g_t = measured ``grad_norm_sq``. The interpolation constants a, b (Assumptions 4, 6) are not in
base.CONSTANTS: they are read as constants ``a_int``, ``b_int`` (missing -> the bound is reported unavailable).
c of eta = c/t: the bound option ``options["c"]`` if given, else c = eta of round 1 (lr[0]). Thm 12's constants
travel as one :class:`Thm12` record.
Thm 12 is stated at horizon T; registered bounds evaluate it at every horizon t = 1..T (values[0] = 0).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, at_horizons, iterate, register

SRC = "FedInit"


# --------------------------------------------------------------------------------------------------------------
# plain functions
# --------------------------------------------------------------------------------------------------------------
class Thm12(NamedTuple):
    """Thm 12's constants: N active clients per round, loss bound U, K local steps, C clients, S samples per
    client, per-sample gradient std sigma_l, L_G, smoothness L."""

    N: int
    U: float
    K: int
    C: int
    S: int
    sigma_l: float
    L_G: float
    L: float


def thm12(T, t0, k: Thm12, c, beta):
    """Thm 12: N U K t0/(C S) + 2 sigma_l L_G/((1+2 beta) C S L) (T/t0)^{cKL}."""
    N, U, K, C, S, sigma_l, L_G, L = k
    return N * U * K * t0 / (C * S) + 2 * sigma_l * L_G / ((1 + 2 * beta) * C * S * L) * (T / t0) ** (c * K * L)


def t0_star(T, k: Thm12, c, beta, exact=False, clamp=True):
    """Balancing point [2 sigma_l L_G/((1+2beta) N U K L)]^{1/(1+cKL)} T^{cKL/(1+cKL)}; ``exact``: the true
    minimiser (extra (cKL)^{1/(1+cKL)}). Clamped to [1, T] unless ``clamp=False``."""
    q = c * k.K * k.L
    A = 2 * k.sigma_l * k.L_G / ((1 + 2 * beta) * k.L)
    t0 = ((q if exact else 1.0) * A / (k.N * k.U * k.K)) ** (1 / (1 + q)) * np.asarray(T, float) ** (q / (1 + q))
    return np.clip(t0, 1.0, T) if clamp else t0


def eps_G_star(T, k: Thm12, c, beta):
    """Eq. (8): 2/(C S) [2 sigma_l L_G/((1+2beta) L)]^{1/(1+cKL)} (N U K T)^{cKL/(1+cKL)}."""
    N, U, K, C, S, sigma_l, L_G, L = k
    q = c * K * L
    return 2 / (C * S) * (2 * sigma_l * L_G / ((1 + 2 * beta) * L)) ** (1 / (1 + q)) * (N * U * K * T) ** (q / (1 + q))


def phi_round(lr_t, K, L):
    """phi(t) = prod_k (1 + eta_k^t L) = (1 + eta_t L)^K (constant lr inside the round)."""
    return (1 + np.asarray(lr_t, float) * L) ** K


def premise_ok(lr, K, L, beta, t0):
    """Thm 12 premise (1+2beta) phi(t) <= phi(t-1) for t in [t0, T-1] (rounds with a defined lr; t0 >= 1)."""
    ph = phi_round(lr, K, L)
    t0 = max(1, int(np.floor(t0)))
    if t0 >= len(ph):
        return True
    return bool(np.all((1 + 2 * beta) * ph[t0:] <= ph[t0 - 1:-1] * (1 + 1e-12)))


def thm12_schedule(lr, T, t0, k: Thm12, beta, honest=False):
    """Thm 12 before eta = c/t: N U K t0/(C S) + L_G exp(L sum_{tau=t0-1}^{T} K eta_tau) 2 sigma_l/((1+2beta) C S L).
    ``lr`` holds eta of rounds 0..; rounds past its end reuse the last value. ``honest``: no premise -> multiply
    by (1+2beta)^{T-t0+2} and drop the 1/(1+2beta)."""
    N, U, K, C, S, sigma_l, L_G, L = k
    lr = np.asarray(lr, float)
    t0 = max(1, int(np.floor(t0)))
    taus = np.arange(t0 - 1, int(T) + 1)
    eta = lr[np.minimum(taus, len(lr) - 1)]
    expo = L * K * float(np.sum(eta))
    if honest:
        delta = np.exp(expo) * (1 + 2 * beta) ** (T - t0 + 2) * 2 * sigma_l / (C * S * L)
    else:
        delta = np.exp(expo) * 2 * sigma_l / ((1 + 2 * beta) * C * S * L)
    return N * U * K * t0 / (C * S) + L_G * delta


def thm15(beta_seq, a, b, c, L_G, K, C, S):
    """Thm 15: exp(2 sum_{t=1}^T beta^t) a b c L_G^2 K / (2 beta^0 C S); ``beta_seq`` = [beta^0, ..., beta^T]."""
    bs = np.asarray(beta_seq, float)
    return np.exp(2 * np.sum(bs[1:])) * a * b * c * L_G ** 2 * K / (2 * bs[0] * C * S)


def thm15_premise(lr, K, beta_seq):
    """phi(t)/beta^t non-increasing, varphi(t) = sum_k eta_k^t = K eta_t."""
    bs = np.asarray(beta_seq, float)[: len(lr)]
    if np.any(bs <= 0):
        return False
    r = K * np.asarray(lr, float) / bs
    return bool(np.all(np.diff(r) <= 1e-12 * np.abs(r[:-1])))


def table3_sgd(T, C, S, c, L):
    return np.asarray(T, float) ** (c * L / (1 + c * L)) / (C * S)


def table3_fedavg(T, N, K, C, S, c, L):
    q = c * K * L
    return (N * K * np.asarray(T, float)) ** (q / (1 + q)) / (C * S)


def divergence_forward(lr, K, beta, sigma_l2, sigma_g2, g):
    """Forward form: D[t+1] = 189 beta^2 D[t] + 132 eta_t^2 K (sigma_l2 + 6K sigma_g2) + 804 eta_t^2 K^2 g[t]."""
    lr, g = np.asarray(lr, float), np.asarray(g, float)[: len(lr)]
    return iterate(189 * beta ** 2, 132 * lr ** 2 * K * (sigma_l2 + 6 * K * sigma_g2) + 804 * lr ** 2 * K ** 2 * g)


def divergence_literal(lr, K, L, beta, sigma_l2, sigma_g2, g, sum_grad_sq_over_C2=None):
    """Literal Lemma 23: D[t+1] = 141 beta^2 D + 96 eta^2 K sigma + 576 eta^2 K^2 g + 6 eta^2 X_t with
    X_t = ||sum_i sum_k grad f_i(w_{i,k})||^2 / C^2 measured, or (if None) bounded by 2 K L^2 V1 + 2 K^2 g with
    Lemma 21's V1 <= 4 K beta^2 D + 3 K^2 eta^2 sigma + 18 K^3 eta^2 g (kept exact, without eta K L <= 1)."""
    lr, g = np.asarray(lr, float), np.asarray(g, float)[: len(lr)]
    sig = sigma_l2 + 6 * K * sigma_g2
    a = 141 * beta ** 2 * np.ones_like(lr)
    b = 96 * lr ** 2 * K * sig + 576 * lr ** 2 * K ** 2 * g
    if sum_grad_sq_over_C2 is not None:
        b = b + 6 * lr ** 2 * np.asarray(sum_grad_sq_over_C2, float)[: len(lr)]
    else:
        a = a + 6 * lr ** 2 * 2 * K * L ** 2 * 4 * K * beta ** 2
        b = b + 6 * lr ** 2 * (2 * K * L ** 2 * (3 * K ** 2 * lr ** 2 * sig + 18 * K ** 3 * lr ** 2 * g)
                               + 2 * K ** 2 * g)
    return iterate(a, b)


def divergence_interpolation(lr, K, beta, a_int, b_int, g):
    """Lemma 26: D[t+1] = 39 beta^2 D[t] + 114 a^2 b^2 eta_t^2 K^2 g[t]."""
    lr, g = np.asarray(lr, float), np.asarray(g, float)[: len(lr)]
    return iterate(39 * beta ** 2, 114 * a_int ** 2 * b_int ** 2 * lr ** 2 * K ** 2 * g)


def kappa_beta(beta):
    return 1 / (1 - 141 * beta ** 2)


def C_beta(beta):
    """C_beta = kappa_beta/(1 - 48 beta^2 kappa_beta) = 1/(1 - 189 beta^2)."""
    kb = kappa_beta(beta)
    return kb / (1 - 48 * beta ** 2 * kb)


def gamma_beta(beta):
    return 1 / (1 - 39 * beta ** 2)


def lam_fedinit(eta, K, L, N, beta):
    """lambda = 1/2 - 38 eta K L/N - 728 beta^2 kappa_beta eta K L/N - 9 eta^2 K^2 L^2 (App., Thm 1)."""
    return 0.5 - 38 * eta * K * L / N - 728 * beta ** 2 * kappa_beta(beta) * eta * K * L / N - 9 * (eta * K * L) ** 2


def zeta_fedinit(eta, K, L, a, b, beta, literal=False):
    """zeta = 1/2 - 6a^2b^2 eta K L - X - 6 a^2 b^2 eta^2 K^2 L^2 with X = 228 beta^2 gamma_beta a^2 b^2 eta K L
    (the derivation's reading) or the printed 114 gamma_beta a^2 b^2 eta K (``literal``)."""
    ab = a ** 2 * b ** 2
    X = 114 * gamma_beta(beta) * ab * eta * K if literal else 228 * beta ** 2 * gamma_beta(beta) * ab * eta * K * L
    return 0.5 - 6 * ab * eta * K * L - X - 6 * ab * (eta * K * L) ** 2


def thm17_avg(eta, T, K, N, L, beta, D0, sigma_l2, sigma_g2, lam=None):
    """Thm 17: eta 804 C_beta K D0/(lam T) + eta^2 J_beta K sigma, J_beta = C_beta (132 + 804 kappa/(lam N))."""
    lam = lam_fedinit(eta, K, L, N, beta) if lam is None else lam
    kap = 8 + 78 * beta ** 2 * kappa_beta(beta) ** 2
    Cb = C_beta(beta)
    J = Cb * (132 + 804 * kap / (lam * N))
    return eta * 804 * Cb * K * D0 / (lam * np.asarray(T, float)) + eta ** 2 * J * K * (sigma_l2 + 6 * K * sigma_g2)


def thm19_avg(eta, T, K, L, beta, D0, a, b, zeta=None):
    """Thm 19: 114 gamma_beta a^2 b^2 eta K D0/(zeta T)."""
    zeta = zeta_fedinit(eta, K, L, a, b, beta) if zeta is None else zeta
    return 114 * gamma_beta(beta) * a ** 2 * b ** 2 * eta * K * D0 / (zeta * np.asarray(T, float))


# --------------------------------------------------------------------------------------------------------------
# registered wrappers
# --------------------------------------------------------------------------------------------------------------
def _beta(st: Setting) -> float:
    return float(st.param("beta")) if st.algo == "fedinit" else 0.0  # FedAvg is FedInit with beta = 0


def _flags(st: Setting, beta, lr, a=None):
    K, L, N = st.K, st.const("L"), st.s
    f = {"beta < 1/sqrt(141) ~ 0.0842 (kappa_beta)": bool(beta < 1 / np.sqrt(141)),
         "beta < 1/sqrt(189) ~ 0.0727 (C_beta)": bool(beta < 1 / np.sqrt(189)),
         "eta <= 1/(N K L) (Thm 1)": bool(np.all(lr <= 1 / (N * K * L))),
         "eta <= 1/(K L) (Lemmas 22, 23)": bool(np.all(lr <= 1 / (K * L))),
         "lambda > 0": bool(np.all(lam_fedinit(lr, K, L, N, beta) > 0)),
         "K > 1": bool(K > 1), "1 < N < C (partial participation)": bool(1 < N < st.M)}
    if a is not None:
        f["beta < 1/sqrt(39) ~ 0.160 (gamma_beta)"] = bool(beta < 1 / np.sqrt(39))
        f["eta <= 1/(a K L) (Thm 6)"] = bool(np.all(lr <= 1 / (a * K * L)))
    return f


def _thm12_consts(st: Setting) -> Thm12:
    return Thm12(N=st.s, U=st.const("U"), K=st.K, C=st.M, S=st.n, sigma_l=np.sqrt(st.const("sigma_l2_sample")),
                 L_G=st.const("L_G"), L=st.const("L"))


@register("fedinit", "fedavg", name="fedinit.thm12")
def thm12_registered(st: Setting) -> list:
    """Thm 12 at horizons t = 1..T: "paper" (t0*, eq. 8), "exact" (exact minimiser), "schedule" (the run's lr,
    t0 = t0*), "honest" (run's lr, no premise). premise_ok is the Thm-12 balancing premise on the run's lr."""
    beta, lr = _beta(st), st.round_lrs()
    k = _thm12_consts(st)
    c = float(st.option("c", lr[0]))
    t = np.arange(1, st.T + 1, dtype=float)
    batch1 = {"batch size 1 (Lemma 27 hit probability)": bool(st.b == 1)}
    ts, te = t0_star(t, k, c, beta), t0_star(t, k, c, beta, exact=True)
    prem = premise_ok(lr, st.K, k.L, beta, ts[-1])
    cond = {"eta_t <= c/t (Thm 12 schedule)": bool(np.all(lr <= c / t * (1 + 1e-12))), **batch1, "premise_ok": prem}
    out = [Bound("fedinit.thm12", st.algo, "gen_gap", "paper", f"{SRC} Thm 12 eq. (8)",
                 np.concatenate([[0.0], eps_G_star(t, k, c, beta)]), conditions=dict(cond),
                 derived={"t0_star": float(ts[-1]), "c": c, "beta": beta}),
           Bound("fedinit.thm12", st.algo, "gen_gap", "exact", f"{SRC} Thm 12, exact t0",
                 np.concatenate([[0.0], thm12(t, te, k, c, beta)]), conditions=dict(cond),
                 derived={"t0_exact": float(te[-1])})]
    for honest, form in ((False, "schedule"), (True, "honest")):
        v = at_horizons(st.T, lambda T: thm12_schedule(lr, float(T), ts[T - 1], k, beta, honest=honest), first=0.0)
        out.append(Bound("fedinit.thm12", st.algo, "gen_gap", form, f"{SRC} Thm 12 proof, general schedule", v,
                         conditions=dict(batch1) if honest else dict(batch1, premise_ok=prem)))
    return out


@register("fedinit", name="fedinit.thm15")
def thm15_registered(st: Setting) -> Bound:
    """Thm 15 at horizons t = 1..T with constant beta^t = beta (the theorem wants a decaying sequence)."""
    beta, lr = _beta(st), st.round_lrs()
    a, b = st.const("a_int"), st.const("b_int")
    c = float(st.option("c", lr[0]))
    bs = np.full(st.T + 1, beta)
    v = at_horizons(st.T, lambda T: thm15(bs[: T + 1], a, b, c, st.const("L_G"), st.K, st.M, st.n)
                    if beta > 0 else np.inf, first=0.0)
    cond = {"beta^0 > 0": bool(beta > 0), "premise varphi(t)/beta^t non-increasing": thm15_premise(lr, st.K, bs),
            "eta_t <= c/t": bool(np.all(lr <= c / np.arange(1, st.T + 1) * (1 + 1e-12)))}
    return Bound("fedinit.thm15", st.algo, "gen_gap", "paper", f"{SRC} Thm 15 eq. (9)", v, conditions=cond)


@register("fedinit", "fedavg", name="fedinit.table3")
def table3_registered(st: Setting) -> list:
    """Table 3 rates (unit constants) vs t: SGD on CS samples and FedAvg/FedInit."""
    lr = st.round_lrs()
    c, L = float(st.option("c", lr[0])), st.const("L")
    t = np.arange(st.T + 1, dtype=float)
    rate_only = {"a bound (Table 3 gives rates: all constants set to 1)": False}
    return [Bound("fedinit.table3", st.algo, "gen_gap", "rate_sgd", f"{SRC} Table 3",
                  table3_sgd(t, st.M, st.n, c, L), conditions=dict(rate_only), note="rate, unit constants"),
            Bound("fedinit.table3", st.algo, "gen_gap", "rate", f"{SRC} Table 3",
                  table3_fedavg(t, st.s, st.K, st.M, st.n, c, L), conditions=dict(rate_only),
                  note="rate, unit constants")]


@register("fedinit", "fedavg", name="fedinit.divergence")
def divergence_registered(st: Setting) -> list:
    """Divergence Delta^t: forward ("corrected"), literal Lemma 23 ("paper"), interpolation (if a_int, b_int)."""
    if "grad_norm_sq" not in st.measured:
        raise KeyError("measured grad_norm_sq is needed")
    beta, lr = _beta(st), st.round_lrs()
    g = np.asarray(st.measured["grad_norm_sq"], float)
    sl2, sg2, L = st.const("sigma_l2_sample"), st.const("sigma_g2"), st.const("L")
    flags = _flags(st, beta, lr)
    out = []
    v = divergence_forward(lr, st.K, beta, sl2, sg2, g)
    out.append(Bound("fedinit.divergence", st.algo, "divergence", "corrected", f"{SRC} Lemma 23, forward form", v,
                     conditions=dict(flags), derived={"C_beta": C_beta(beta)}))
    X = st.measured.get("sum_grad_sq_over_C2")
    v = divergence_literal(lr, st.K, L, beta, sl2, sg2, g, X)
    out.append(Bound("fedinit.divergence", st.algo, "divergence", "paper", f"{SRC} Lemma 23 literal", v,
                     conditions=dict(flags)))
    if "a_int" in st.constants and "b_int" in st.constants:
        a, b = st.const("a_int"), st.const("b_int")
        v = divergence_interpolation(lr, st.K, beta, a, b, g)
        out.append(Bound("fedinit.divergence", st.algo, "divergence", "interpolation", f"{SRC} Lemma 26", v,
                         conditions=_flags(st, beta, lr, a)))
    return out


@register("fedinit", "fedavg", name="fedinit.thm17")
def thm17_registered(st: Setting) -> list:
    """Thm 17 (and Thm 19 if a_int, b_int) average divergence at horizons t = 1..T, eta = mean lr of the run."""
    beta, lr = _beta(st), st.round_lrs()
    eta, L = float(np.mean(lr)), st.const("L")
    t = np.arange(st.T + 1, dtype=float)
    with np.errstate(divide="ignore"):
        v = thm17_avg(eta, t, st.K, st.s, L, beta, st.const("F0"), st.const("sigma_l2_sample"), st.const("sigma_g2"))
    v[0] = np.nan
    out = [Bound("fedinit.thm17", st.algo, "divergence_avg", "paper", f"{SRC} Thm 17 eq. (11)", v,
                 conditions=_flags(st, beta, lr), derived={"lambda": lam_fedinit(eta, st.K, L, st.s, beta)})]
    if "a_int" in st.constants and "b_int" in st.constants:
        a, b = st.const("a_int"), st.const("b_int")
        z = zeta_fedinit(eta, st.K, L, a, b, beta)
        with np.errstate(divide="ignore"):
            v = thm19_avg(eta, t, st.K, L, beta, st.const("F0"), a, b)
        v[0] = np.nan
        out.append(Bound("fedinit.thm19", st.algo, "divergence_avg", "paper", f"{SRC} Thm 19 eq. (12)", v,
                         conditions=dict(_flags(st, beta, lr, a), **{"zeta > 0": bool(z > 0)}),
                         derived={"zeta": z}))
    return out
