"""Libra (Zeng et al.): model-stability recursions, gradient-norm and excess-risk bounds (docs/bounds-reference.md).

Paper symbols -> stabkit: eta_l = ``setting.lr[t]`` (time varying), eta_g = ``setting.global_lr`` (server SGD /
FOSM), L = ``L``, sigma_l^2 = ``sigma_l2`` (at the run's batch size), sigma_g^2 = ``sigma_g2`` (per-client max;
Assumption 2 may also be read as an average), D = F = ``F0``, C = 1/(2 mu) with mu = ``mu_pl``. Libra's n is the
TOTAL number of samples, so ``n_total = M * n`` enters sigma_n^2 = sigma_l^2 + 3 b sigma_g^2 / n (the version of
Theorem 2's proof; the statement prints sigma_g^2 / n); b/n_i <= 1/2 uses the per-client n.
s_t = E||x^t - x~^t||^2 (quantity "disc_sq").

Stability evaluators:
  * S-paper   s_{t+1} = (1 + psi eta_g^2) s_t + psi_sigma (eta_l eta_g)^2,  psi = (1+p) psi0,
              psi_sigma = (1 + 1/p) 16 K sigma_n^2   (form "paper"; p free, default 1)
  * S-R1      s_{t+1} = ((1 - eta_g) sqrt(s_t) + eta_g sqrt(psi0 s_t + N0))^2  (form "corrected"; eta_g <= 1)
  * S-FOSM    s_{t+1} = ((1+beta-eta_g nu)^2 + eta_g^2 nu^2 psi0) s_t + beta^2 s_{t-1} + nu^2 N0 eta_g^2 ("paper")
  * S-FOSM-3  each of the three terms times 3 (Lemma 3: eq. (25) omits it; form "corrected")
  with psi0 = (1 + 4 eta_l L)^K and N0 = 16 K sigma_n^2 eta_l^2.
Closed forms: Thm 2 paper psi_sigma/psi T^{c psi}; safe psi_sigma c zeta(1 + c psi) T^{c psi} (the printed tail sum
is invalid at tau = 0); Step 3 psi_sigma/(c psi) T^{1 + c psi} eta~^2; FOSM psi_sigma/(c psi) S_T(q)
T^{1 + nu^2 c psi} eta~^2 with q = 2 beta (1 + beta) (geometric sum, "corrected") or (1 + beta)^T (Thm 4 form, "paper").

The constant c of eta_g^t <= sqrt(c/t): the bound option ``setting.options["c"]`` if given, else c = eta_g^2 (the
condition then holds at t = 1 and, for a constant eta_g, fails afterwards, and is flagged;
the paper gives no estimator of c); C = 1/(2 mu_pl) unless the option ``C_opt`` is given.

Plain functions take the problem's constants as one :class:`Problem` (L, K, sigma_l^2, sigma_g^2, b, n_total) and
the excess-risk knobs as one :class:`Risk`. Corollary 1 on measured curves is :func:`excess_risk_dynamics`; the
measurement statistics on them (T*, the fitting regime, the NNLS fit of Corollary 1's shape) are in
:mod:`stabkit.analysis.excess_risk`.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np
from scipy.special import zeta

from stabkit.analysis.bounds.base import Bound, Setting, at_horizons, geometric_closed, geometric_sum, iterate, register
from stabkit.analysis.excess_risk import fitting_regime, minimum_excess_risk_round

SRC = "Libra"
SERVER_SGD = ("fedavg",)
FOSM_ALGOS = ("fosm", "fedavgm", "fosm_ema")


# --------------------------------------------------------------------------------------------------------------
# plain functions (explicit numbers)
# --------------------------------------------------------------------------------------------------------------
class Problem(NamedTuple):
    """The constants of Libra's recursions: smoothness L, local steps K, local and heterogeneity variances, batch
    size b and the TOTAL number of samples n_total."""

    L: float
    K: int
    sigma_l2: float
    sigma_g2: float
    b: int = 1
    n_total: int = 1


class Risk(NamedTuple):
    """The excess-risk knobs of E_min: D = f(x_0) - f*, C of the optimisation term, c of eta_g^t <= sqrt(c/t),
    Corollary 1's gamma (None: L) and ``paper_literal`` (phi1, phi2 swapped as printed)."""

    D: float
    C: float
    c: float
    gamma: Optional[float] = None
    paper_literal: bool = False


def psi0(lr_l, L, K):
    """psi0 = (1 + 4 eta_l L)^K (Lemma 5, eq. 12)."""
    return (1.0 + 4.0 * np.asarray(lr_l, float) * L) ** K


def sigma_n2(sigma_l2, sigma_g2, b, n_total):
    """sigma_l^2 + 3 b sigma_g^2 / n (the version of Theorem 2's proof, eqs. (13)-(16))."""
    return sigma_l2 + 3.0 * b * sigma_g2 / n_total


def noise_N0(lr_l, pr: Problem):
    """N0 = 16 K sigma_n^2 eta_l^2 (eq. 14)."""
    return 16.0 * pr.K * sigma_n2(pr.sigma_l2, pr.sigma_g2, pr.b, pr.n_total) * np.asarray(lr_l, float) ** 2


def psi_sigma(pr: Problem, p=None):
    """psi_sigma = (1 + 1/p) 16 K sigma_n^2 (Thm 2 proof); p=None: 16 K sigma_n^2 (FOSM, no p)."""
    base = 16.0 * pr.K * sigma_n2(pr.sigma_l2, pr.sigma_g2, pr.b, pr.n_total)
    return base if p is None else (1.0 + 1.0 / p) * base


def _lrs(lr_l, eta_g) -> tuple:
    """``(eta_l, eta_g)`` as float arrays of one length (scalars broadcast)."""
    return np.broadcast_arrays(np.atleast_1d(np.asarray(lr_l, float)), np.atleast_1d(np.asarray(eta_g, float)))


def stability_paper(lr_l, eta_g, pr: Problem, p=1.0):
    """S-paper recursion, s_0 = 0; ``lr_l``, ``eta_g`` scalars or length-T arrays. Returns s_0..s_T."""
    lr_l, eta_g = _lrs(lr_l, eta_g)
    a = 1.0 + (1.0 + p) * psi0(lr_l, pr.L, pr.K) * eta_g ** 2
    bb = psi_sigma(pr, p) * (lr_l * eta_g) ** 2
    return iterate(a, bb)


def stability_r1(lr_l, eta_g, pr: Problem):
    """S-R1 (Young's inequality placed correctly, p optimised; R1), s_0 = 0."""
    lr_l, eta_g = _lrs(lr_l, eta_g)
    p0, n0 = psi0(lr_l, pr.L, pr.K), noise_N0(lr_l, pr)
    s = np.zeros(len(lr_l) + 1)
    for t in range(len(lr_l)):
        keep = (1.0 - eta_g[t]) * np.sqrt(s[t]) if eta_g[t] != 1.0 else 0.0  # no 0 * inf = NaN after an overflow
        s[t + 1] = (keep + eta_g[t] * np.sqrt(p0[t] * s[t] + n0[t])) ** 2
    return s


def stability_r1_closed(T, lr_l, pr: Problem):
    """S-R1 with eta_g = 1 and constant eta_l: s_t = N0 (psi0^t - 1)/(psi0 - 1), t = 0..T."""
    p0, n0 = float(psi0(lr_l, pr.L, pr.K)), float(noise_N0(lr_l, pr))
    return geometric_closed(p0, n0, np.arange(T + 1))


def stability_fosm(lr_l, eta_g, pr: Problem, beta, nu, three=False):
    """S-FOSM (eq. 25 literal) or S-FOSM-3 (``three=True``: each term x3, Lemma 3), s_{-1} = s_0 = 0."""
    lr_l, eta_g = _lrs(lr_l, eta_g)
    p0, n0 = psi0(lr_l, pr.L, pr.K), noise_N0(lr_l, pr)
    f = 3.0 if three else 1.0
    s = np.zeros(len(lr_l) + 1)
    prev = 0.0
    for t in range(len(lr_l)):
        a = (1.0 + beta - eta_g[t] * nu) ** 2 + eta_g[t] ** 2 * nu ** 2 * p0[t]
        s[t + 1] = f * (a * s[t] + beta ** 2 * prev + nu ** 2 * n0[t] * eta_g[t] ** 2)
        prev = s[t]
    return s


def thm2_paper(T, psi, psi_sig, c):
    """Thm 2 / eq. (15): s_T <= psi_sigma/psi T^{c psi}."""
    return psi_sig / psi * np.asarray(T, float) ** (c * psi)


def thm2_safe(T, psi, psi_sig, c):
    """Thm 2 with the valid tail sum (not the printed sum from tau = 0): psi_sigma c zeta(1 + c psi) T^{c psi}."""
    return psi_sig * c * zeta(1.0 + c * psi) * np.asarray(T, float) ** (c * psi)


def step3_closed(T, psi, psi_sig, c, eta_tilde):
    """Step 3, eq. (22): s_T <= psi_sigma/(c psi) T^{1 + c psi} eta~^2."""
    return psi_sig / (c * psi) * np.asarray(T, float) ** (1.0 + c * psi) * eta_tilde ** 2


def fosm_closed(T, psi, psi_sig, c, eta_tilde, beta, nu, factor="geometric"):
    """FOSM closed form: psi_sigma/(c psi) F_T T^{1 + nu^2 c psi} eta~^2, F_T = S_T(2 beta (1+beta)) ("geometric")
    or (1+beta)^T ("thm4") or the printed psi_beta = q^{T-1}/(q-1) ("printed", negative for beta < 0.366)."""
    T = np.asarray(T, float)
    q = 2.0 * beta * (1.0 + beta)
    fac = {"geometric": lambda: geometric_sum(q, T), "thm4": lambda: (1.0 + beta) ** T,
           "printed": lambda: q ** (T - 1.0) / (q - 1.0)}[factor]()
    return psi_sig / (c * psi) * fac * T ** (1.0 + nu ** 2 * c * psi) * eta_tilde ** 2


def _kappas(pr: Problem) -> tuple:
    """kappa1 = 5 L (sigma_l^2 + 6 K sigma_g^2), kappa2 = 60 L^2 (9 sigma_l^2 + K sigma_g^2) of eq. (20)."""
    return (5.0 * pr.L * (pr.sigma_l2 + 6.0 * pr.K * pr.sigma_g2),
            60.0 * pr.L ** 2 * (9.0 * pr.sigma_l2 + pr.K * pr.sigma_g2))


def _rho(pr: Problem, et):
    """rho = (1 - 480 L K eta~) / 16 (Thm 3)."""
    return (1.0 - 480.0 * pr.L * pr.K * et) / 16.0


def grad_norm_bound(T, lr_l, eta_g, pr: Problem, D):
    """Eq. (20): (1/T) sum_t E||grad f||^2 <= 2D/(rho T K eta~) + kappa1 eta~/rho + kappa2 K eta_l^2/rho.
    Returns (value, rho); value is +inf where rho <= 0."""
    et = lr_l * eta_g
    rho = _rho(pr, et)
    k1, k2 = _kappas(pr)
    if rho <= 0:
        return np.full(np.shape(T), np.inf) if np.ndim(T) else np.inf, rho
    T = np.asarray(T, float)
    return 2.0 * D / (rho * T * pr.K * et) + k1 * et / rho + k2 * pr.K * lr_l ** 2 / rho, rho


def corollary1(s, g, L, C, gamma):
    """Corollary 1: B_t(gamma) = (L+gamma)/2 s_t + (1/(2 gamma) + C) g_t."""
    return (L + gamma) / 2.0 * np.asarray(s, float) + (1.0 / (2.0 * gamma) + C) * np.asarray(g, float)


def gen_gap_bound(s, g, L):
    """Thm 1 optimised over gamma (gamma* = sqrt(g/s)): (L/2) s + sqrt(s g)."""
    s, g = np.asarray(s, float), np.asarray(g, float)
    return L / 2.0 * s + np.sqrt(np.clip(s, 0, None) * np.clip(g, 0, None))


def excess_risk_dynamics(s_t, g_t, L, C) -> dict:
    """Per-round B*_t = (L/2) s_t + sqrt(s_t g_t) + C g_t (Corollary 1 optimised over gamma) and its two parts:
    ``generalisation`` = (L/2) s_t + sqrt(s_t g_t), ``optimisation`` = C g_t; ``total`` is their sum."""
    gen = gen_gap_bound(s_t, g_t, L)
    opt = C * np.asarray(g_t, float)
    return {"total": gen + opt, "generalisation": gen, "optimisation": opt}


def lemma1_opt(r0, b, e, d, T):
    """Lemma 1 (Koloskova et al.): eta* = min{1/d, sqrt(r0/(b T)), (r0/(e T))^{1/3}} and the bound
    2 sqrt(b r0/T) + 2 e^{1/3} (r0/T)^{2/3} + d r0/T."""
    cands = [1.0 / d]
    if b > 0:
        cands.append(np.sqrt(r0 / (b * T)))
    if e > 0 and np.isfinite(e):
        cands.append((r0 / (e * T)) ** (1.0 / 3.0))
    return 2.0 * np.sqrt(b * r0 / T) + 2.0 * e ** (1.0 / 3.0) * (r0 / T) ** (2.0 / 3.0) + d * r0 / T, min(cands)


def _phis(risk: Risk, L: float) -> tuple:
    """(phi1, phi2) = ((L + gamma)/2, 1/(2 gamma) + C) (Corollary 1; swapped under ``paper_literal``, as printed)."""
    gamma = L if risk.gamma is None else risk.gamma
    phi1, phi2 = (L + gamma) / 2.0, 1.0 / (2.0 * gamma) + risk.C
    return (phi2, phi1) if risk.paper_literal else (phi1, phi2)


def e_min_sgd(T, lr_l, eta_g, pr: Problem, risk: Risk, p=1.0) -> dict:
    """E_min via eq. (23) with Lemma 1 (factor 2 restored, as in eq. (35)), server SGD. phi1 = (L+gamma)/2 multiplies
    stability, phi2 = 1/(2 gamma) + C the gradient terms (Corollary 1; ``paper_literal`` swaps them as printed).
    gamma defaults to L. Returns value, eta_tilde_star, eta_g_star, rho and the coefficients."""
    phi1, phi2 = _phis(risk, pr.L)
    c, K = risk.c, pr.K
    et = lr_l * eta_g
    rho = _rho(pr, et)
    k1, k2 = _kappas(pr)
    psi = (1.0 + p) * float(psi0(lr_l, pr.L, K))
    psig = psi_sigma(pr, p)
    if rho <= 0:
        return {"value": np.inf, "eta_tilde_star": np.nan, "eta_g_star": np.nan, "rho": rho}
    Dbar = 2.0 * phi2 * risk.D / (rho * K)
    k1bar = phi2 * k1 / rho
    kstab = phi1 * psig / (c * psi) * T ** (1.0 + c * psi)
    drift = phi2 * k2 * K * lr_l ** 2 / rho
    val, et_star = lemma1_opt(Dbar, k1bar, kstab, np.sqrt(T / c), T)
    return {"value": (val + drift) if rho > 0 else np.inf, "eta_tilde_star": et_star, "eta_g_star": et_star / lr_l,
            "rho": rho, "Dbar": Dbar, "kappa1bar": k1bar, "kappa_stab": kstab, "drift": drift}


def fosm_rho_hat(et, pr: Problem, c, beta, nu, t) -> float:
    """The printed (garbled in the OCR) rho_hat with c~ = c, minimised over the rounds ``t`` (1 at beta = 0)."""
    if beta <= 0:
        return 1.0
    r = 1.0 - 15.0 / 16.0 * (1.0 + 32.0 * c * (1.0 + 1.0 / beta ** 2) * pr.L * et) \
        * nu ** 2 * beta ** 2 / (1.0 - beta ** 2) * (1.0 - beta ** (2 * (t + 1)))
    return float(np.min(r))


def e_min_fosm(T, lr_l, eta_g, pr: Problem, risk: Risk, beta, nu, rho_hat=None, factor="geometric") -> dict:
    """E_min via eq. (35) (FOSM). rho_hat defaults to :func:`fosm_rho_hat`; Psi1, Psi2 are averaged over t;
    F_T per :func:`fosm_closed` ``factor``."""
    phi1, phi2 = _phis(risk, pr.L)
    c, K, L = risk.c, pr.K, pr.L
    et = lr_l * eta_g
    t = np.arange(int(T))
    one_b2 = 1.0 - beta ** 2
    rho_hat = fosm_rho_hat(et, pr, c, beta, nu, t) if rho_hat is None else rho_hat
    psi1 = (1.0 - beta ** (2 * (t + 1))) * c * nu ** 2 / one_b2 ** 2 * 5.0 * L * (pr.sigma_l2 + 6.0 * K * pr.sigma_g2)
    psi2 = (1.0 - beta ** (2 * t)) * nu ** 2 * beta ** 2 / one_b2 * 60.0 * L ** 2 \
        * (9.0 * pr.sigma_l2 + K * pr.sigma_g2) * K * lr_l ** 2
    psi = float(psi0(lr_l, L, K))
    q = 2.0 * beta * (1.0 + beta)
    fac = {"geometric": geometric_sum(q, T), "thm4": (1.0 + beta) ** T}[factor]
    if rho_hat <= 0:
        return {"value": np.inf, "eta_tilde_star": np.nan, "rho_hat": rho_hat}
    Dt = 2.0 * phi2 * risk.D / (rho_hat * K)
    P1 = float(np.mean(phi2 * psi1 / rho_hat))
    Pstab = phi1 * psi_sigma(pr) / (c * psi) * fac * T ** (1.0 + nu ** 2 * c * psi)
    drift = float(np.mean(phi2 * psi2 / rho_hat))
    val, et_star = lemma1_opt(Dt, P1, Pstab, np.sqrt(T / c), T)
    return {"value": (val + drift) if rho_hat > 0 else np.inf, "eta_tilde_star": et_star, "rho_hat": rho_hat,
            "Dtilde": Dt, "Psi1bar": P1, "Psi_stab": Pstab, "drift": drift}


def rate_E5(T, pr: Problem, F, c, psi, beta=0.0, nu=1.0, a=(1.0, 1.0, 1.0, 1.0)):
    """Rate-only forms (5)/(6) with free O(1) constants a_i: beta = 0 gives E5; beta > 0 gives E6 with
    beta_- = 1 - beta^T (terms 1-2), beta_+ = (1+beta)^T (term 3), exponent (1 - nu^2 c psi)/3."""
    T, K = np.asarray(T, float), pr.K
    sK = pr.sigma_l2 + K * pr.sigma_g2
    sn = pr.sigma_l2 + pr.sigma_g2 / pr.n_total * (3 * pr.b if pr.b else 1)
    bm = 1.0 - beta ** T if beta > 0 else 1.0
    bp = (1.0 + beta) ** T
    return (a[0] * np.sqrt(bm * sK * F / (K * T)) + a[1] * bm * sK / T
            + a[2] * (bp * sn * F ** 2 / (K * c)) ** (1.0 / 3.0) * T ** (-(1.0 - nu ** 2 * c * psi) / 3.0)
            + a[3] * F / (K * np.sqrt(T * c)))


# --------------------------------------------------------------------------------------------------------------
# registered wrappers
# --------------------------------------------------------------------------------------------------------------
class LibraRun(NamedTuple):
    """What every registered Libra bound reads from a run."""

    lr: np.ndarray  # [T] eta_l per round
    eg: np.ndarray  # [T] eta_g per round
    pr: Problem
    c: float
    cond: dict  # the conditions every Libra bound carries
    psi: float  # the largest psi_0 over the rounds
    beta: float  # the run as an FOSM: server SGD is beta = 0, nu = 1
    nu: float
    horizons: np.ndarray  # t = 0..T, the horizons the closed forms are evaluated at
    eta_tilde: float  # the largest eta_l eta_g over the rounds

    def fosm_cond(self) -> dict:
        """The conditions of every FOSM bound: the common ones and eq. (25)."""
        eq25 = bool(np.all(self.eg * self.nu <= 2 * (1 + self.beta)))
        return dict(self.cond, **{"eta_g nu <= 2(1+beta) (eq. 25)": eq25})


def _common(st: Setting) -> LibraRun:
    """The prologue of every registered Libra bound: the run's lrs, problem, conditions and FOSM view."""
    T, K = st.T, st.K
    lr = st.round_lrs()
    eg = np.full(T, float(st.global_lr))
    L = st.const("L")
    pr = Problem(L, K, st.const("sigma_l2"), st.const("sigma_g2"), st.b, st.M * st.n)
    c = float(st.option("c", eg[0] ** 2))
    t = np.arange(1, T + 1)
    psi_max = float(np.max(psi0(lr, L, K)))
    cond = {
        "1/(16KL) <= eta_l <= 1/(8KL) (Lemmas 2, 5, 7)":
            bool(np.all((lr >= 1 / (16 * K * L)) & (lr <= 1 / (8 * K * L)))),
        "eta_l eta_g <= 1/(480KL) (Thm 3, rho > 0)": bool(np.all(lr * eg <= 1 / (480 * K * L))),
        "eta_g^t <= sqrt(c/t) (Thm 2/4)": bool(np.all(eg <= np.sqrt(c / t) * (1 + 1e-12))),
        "c psi < 1 (Thm 4 decays)": bool(c * psi_max < 1),
        "b/n_i <= 1/2 (Lemma 5)": bool(st.b / st.n <= 0.5),
        "full participation s == M (theory)": bool(st.s == st.M),
    }
    return LibraRun(lr, eg, pr, c, cond, psi_max, *_beta_nu(st), np.arange(T + 1, dtype=float),
                    float(np.max(lr * eg)))


def _beta_nu(st: Setting):
    """The run's (beta, nu) as an FOSM: server SGD (FedAvg) is beta = 0, nu = 1; FedAvgM nu = 1; EMA nu = 1 - beta."""
    if st.algo in SERVER_SGD:
        return 0.0, 1.0
    beta = float(st.param("beta"))
    if st.algo == "fedavgm":
        return beta, 1.0
    if st.algo == "fosm_ema":
        return beta, 1.0 - beta
    return beta, float(st.param("nu"))


def _const_lr(lr):
    return bool(np.allclose(lr, lr[0], rtol=0, atol=0))


def _risk(st: Setting, r: LibraRun) -> Risk:
    return Risk(st.const("F0"), _C(st), r.c)


def _mean_lrs(r: LibraRun, t: int) -> tuple:
    """eta_l and eta_g averaged over the first t rounds (a horizon-t bound stated for constant lrs)."""
    return float(np.mean(r.lr[:t])), float(np.mean(r.eg[:t]))


@register(*SERVER_SGD, name="libra.stability")
def stability_server_sgd(st: Setting) -> list:
    """S-paper (p = 1) and S-R1 for server SGD (fedavg: eta_g = the run's global lr)."""
    r = _common(st)
    lr, eg, pr, T, p = r.lr, r.eg, r.pr, st.T, 1.0
    sp = stability_paper(lr, eg, pr, p)
    cf = None
    if _const_lr(lr):
        a = 1 + (1 + p) * float(psi0(lr[0], pr.L, pr.K)) * eg[0] ** 2
        cf = geometric_closed(a, psi_sigma(pr, p) * (lr[0] * eg[0]) ** 2, np.arange(T + 1))
    c1 = dict(r.cond, **{"(1+p)(1-eta_g)^2 <= 1 (Thm 2 proof)": bool(np.all((1 + p) * (1 - eg) ** 2 <= 1))})
    out = [Bound("libra.stability", st.algo, "disc_sq", "paper", f"{SRC} Lemma 6 proof (S-paper)", sp,
                 closed_form=cf, conditions=c1, derived={"p": p})]
    sr = stability_r1(lr, eg, pr)
    cf = stability_r1_closed(T, lr[0], pr) if (_const_lr(lr) and np.all(eg == 1)) else None
    c2 = dict(r.cond, **{"eta_g <= 1 (S-R1)": bool(np.all(eg <= 1))})
    out.append(Bound("libra.stability", st.algo, "disc_sq", "corrected",
                     f"{SRC} Lemma 6, Young's inequality corrected (S-R1)", sr,
                     closed_form=cf, conditions=c2))
    return out


@register(*FOSM_ALGOS, name="libra.stability")
def stability_fosm_bound(st: Setting) -> list:
    """S-FOSM (eq. 25 literal, "paper") and S-FOSM-3 (Lemma 3, "corrected")."""
    r = _common(st)
    beta, nu, cond = r.beta, r.nu, r.fosm_cond()
    out = []
    for three, form in ((False, "paper"), (True, "corrected")):
        s = stability_fosm(r.lr, r.eg, r.pr, beta, nu, three=three)
        out.append(Bound("libra.stability", st.algo, "disc_sq", form,
                         f"{SRC} App. D eq. (25)" + (" x3 (Lemma 3)" if three else ""), s, conditions=dict(cond),
                         derived={"beta": beta, "nu": nu}))
    return out


@register(*SERVER_SGD, name="libra.thm2")
def thm2_bound(st: Setting) -> list:
    """Thm 2 closed forms over horizons t = 1..T (paper and zeta-safe), and the Step-3 form (eq. 22)."""
    r = _common(st)
    c, p, t, et = r.c, 1.0, r.horizons, r.eta_tilde
    psi = (1 + p) * r.psi
    psig = psi_sigma(r.pr, p)
    cond = dict(r.cond, **{"eta_l <= 1 (eta~ <= eta_g)": bool(np.all(r.lr <= 1))})
    der = {"c": c, "psi": psi, "psi_sigma": psig}
    return [
        Bound("libra.thm2", st.algo, "disc_sq", "paper", f"{SRC} Thm 2 eq. (15)/(16)", thm2_paper(t, psi, psig, c),
              conditions=dict(cond), derived=dict(der)),
        Bound("libra.thm2", st.algo, "disc_sq", "corrected", f"{SRC} Thm 2, valid tail sum",
              thm2_safe(t, psi, psig, c), conditions=dict(cond), derived=dict(der)),
        Bound("libra.step3", st.algo, "disc_sq", "paper", f"{SRC} eq. (22) (step-3 stability form)",
              step3_closed(t, psi, psig, c, et), conditions=dict(cond), derived=dict(der, eta_tilde=et)),
    ]


@register(*FOSM_ALGOS, name="libra.fosm_closed")
def fosm_closed_bound(st: Setting) -> list:
    """FOSM closed form over horizons: geometric S_T(q) ("corrected") and (1+beta)^T (Thm 4, "paper")."""
    r = _common(st)
    beta, nu, psi, t, et, cond = r.beta, r.nu, r.psi, r.horizons, r.eta_tilde, r.fosm_cond()
    psig = psi_sigma(r.pr)
    der = {"beta": beta, "nu": nu, "c": r.c, "q": 2 * beta * (1 + beta)}
    return [Bound("libra.fosm_closed", st.algo, "disc_sq", form, f"{SRC} App. D FOSM closed form",
                  fosm_closed(t, psi, psig, r.c, et, beta, nu, factor=fac), conditions=dict(cond), derived=dict(der))
            for fac, form in (("geometric", "corrected"), ("thm4", "paper"))]


@register(*SERVER_SGD, name="libra.grad_norm")
def grad_norm_registered(st: Setting) -> Bound:
    """Eq. (20) average gradient-norm bound at horizons t = 1..T (eta_l, eta_g averaged over the first t rounds)."""
    r = _common(st)
    D = st.const("F0")
    vals = at_horizons(st.T, lambda t: grad_norm_bound(t, *_mean_lrs(r, t), r.pr, D)[0])
    return Bound("libra.grad_norm", st.algo, "grad_norm_sq_avg", "paper",
                 f"{SRC} eq. (20) (last term as eq. (19) implies)", vals,
                 conditions=r.cond)


def _C(st: Setting) -> float:
    return float(st.options["C_opt"]) if "C_opt" in st.options else 1.0 / (2.0 * st.const("mu_pl"))


@register(*SERVER_SGD, *FOSM_ALGOS, name="libra.excess_risk")
def excess_risk_registered(st: Setting) -> list:
    """Corollary 1 optimised over gamma on the MEASURED s_t (disc_sq) and g_t (grad_norm_sq): B*_t (excess risk)
    and the Thm-1 gap-only form (gen_gap). C = 1/(2 mu_pl) (or the option C_opt)."""
    if "disc_sq" not in st.measured or "grad_norm_sq" not in st.measured:
        raise KeyError("measured disc_sq and grad_norm_sq are needed")
    L = st.const("L")
    s, g = np.asarray(st.measured["disc_sq"], float), np.asarray(st.measured["grad_norm_sq"], float)
    cond = {"loss nonnegative and L-smooth (Thm 1; assumed)": True}
    out = []
    try:
        C = _C(st)
        dyn = excess_risk_dynamics(s, g, L, C)
        ts = minimum_excess_risk_round(dyn["total"], start=1)
        out.append(Bound("libra.excess_risk", st.algo, "excess_risk", "corrected",
                         f"{SRC} Corollary 1 (gamma-optimised)", dyn["total"], conditions=dict(cond),
                         derived={"C": C, "T_star": ts, "regime": fitting_regime(dyn["total"], start=1),
                                  "generalisation": dyn["generalisation"], "optimisation": dyn["optimisation"]}))
    except KeyError:
        pass
    out.append(Bound("libra.gen_gap", st.algo, "gen_gap", "corrected", f"{SRC} Thm 1 (gamma-optimised)",
                     gen_gap_bound(s, g, L), conditions=dict(cond)))
    return out


@register(*SERVER_SGD, name="libra.e_min")
def e_min_registered(st: Setting) -> list:
    """E_min via eq. (23) at horizons t = 1..T: phi-corrected ("corrected") and literal ("paper") modes."""
    r = _common(st)
    out = []
    for lit, form in ((False, "corrected"), (True, "paper")):
        risk = _risk(st, r)._replace(paper_literal=lit)
        vals = at_horizons(st.T, lambda t: e_min_sgd(t, *_mean_lrs(r, t), r.pr, risk)["value"])
        last = e_min_sgd(st.T, *_mean_lrs(r, st.T), r.pr, risk) if st.T >= 1 else {}
        out.append(Bound("libra.e_min", st.algo, "excess_risk_min", form,
                         f"{SRC} eq. (23) (x2 of Lemma 1; corrected: phi of Cor. 1)",
                         vals, conditions=dict(r.cond), derived={k: v for k, v in last.items() if k != "value"}))
    return out


@register(*FOSM_ALGOS, name="libra.e_min")
def e_min_fosm_registered(st: Setting) -> Bound:
    """E_min via eq. (35) (FOSM) at horizons t = 1..T, geometric beta-factor, phi-corrected."""
    r = _common(st)
    beta, nu = r.beta, r.nu
    risk = _risk(st, r)
    vals = at_horizons(st.T, lambda t: e_min_fosm(t, *_mean_lrs(r, t), r.pr, risk, beta, nu)["value"])
    last = e_min_fosm(st.T, *_mean_lrs(r, st.T), r.pr, risk, beta, nu)
    cond = dict(r.cond, **{"rho_hat > 0 (FOSM)": bool(last["rho_hat"] > 0)}, **r.fosm_cond(),
                **{"nu = 1 - beta (convergence proof covers the FedCM form only)": bool(abs(nu - (1 - beta)) < 1e-12)})
    return Bound("libra.e_min", st.algo, "excess_risk_min", "corrected",
                 f"{SRC} App. D eq. (35) (constants for nu = 1 - beta)", vals,
                 conditions=cond, derived={k: v for k, v in last.items() if k != "value"})


@register(*SERVER_SGD, *FOSM_ALGOS, name="libra.rate")
def rate_registered(st: Setting) -> Bound:
    """Rate-only (5)/(6) vs T with unit constants (a shape for plotting, not a numeric bound)."""
    r = _common(st)
    t = r.horizons
    with np.errstate(divide="ignore", invalid="ignore"):
        v = rate_E5(t, r.pr, st.const("F0"), r.c, r.psi, beta=r.beta, nu=r.nu)
    v[0] = np.nan
    return Bound("libra.rate", st.algo, "excess_risk_min", "rate", f"{SRC} Thm 4 rate-only eqs. (5)/(6)", v,
                 conditions=r.cond, note="unit O(1) constants: shape only")
