"""FedSWA / FedMoSWA (ICML 2025): Theorem 5.1 per-round recursions of Delta_t = E||theta_t - theta'_t||, as printed
and corrected, the multiplier c~ (printed and corrected), Theorem 5.1 / Table 1 closed forms
(docs/bounds-reference.md).

Paper symbols -> stabkit (NOTE the clash: the paper's L is the Lipschitz constant, its beta the smoothness):
beta = ``L`` (smoothness), L = ``G`` (per-sample loss-gradient bound = Lipschitz constant), sigma =
sqrt(``sigma_l2_sample``) (per-sample, A3), sigma_g = sqrt(``sigma_g2_mean``) (an upper bound on the non-squared
average of A5, by Jensen), G_t = sqrt(measured ``grad_norm_sq``) (else the worst case G_t = L), m = ``M``,
n = ``n``, mu = ``mu_sc`` (strong convexity; optional constant, not in base.CONSTANTS: SC forms only if given).
Step sizes eta_k^t = lr[t] (1 - (1 - rho) k/K) (Eq. 3; fedmo and fedavg: rho = 1). Server coefficient
alpha_eff = global_lr * alpha (fedavg: global_lr). Quantity "disc" (non-squared); eps_gen <= L Delta_T.

Forms: "paper" (A) = the recursion of Theorem 5.1's proof as printed (non-convex), "corrected" (B) = the same
proof with its unrolling errors fixed (e.g. the printed (1 + c)^{K-1} for c^{K-1}), "extension" (C) = alpha and
partial participation, not in the paper. Proof assumptions are conditions: full participation s == M, alpha_eff == 1,
Option I (fedmoswa/fedmo), eta_k^t <= 1/(beta K T).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, register

SRC = "FedSWA"
_FORM_WORDS = {"paper": "as printed", "corrected": "corrected", "extension": "extended"}


# --------------------------------------------------------------------------------------------------------------
# plain functions
# --------------------------------------------------------------------------------------------------------------
class SWAProblem(NamedTuple):
    """The paper's constants: beta (smoothness), L (Lipschitz constant of the loss), per-sample sigma, sigma_g,
    m clients, n samples per client."""

    beta: float
    L: float
    sigma: float
    sigma_g: float
    m: int
    n: int


def local_lrs(lr_t, rho, K):
    """Eq. (3): eta_k = lr_t (1 - (1 - rho) k / K), k = 0..K-1. ``lr_t`` scalar -> [K]; array [T] -> [T, K]."""
    k = np.arange(K)
    return np.multiply.outer(np.asarray(lr_t, float), 1.0 - (1.0 - rho) * k / K)


def lr_sum(lr, rho, K):
    """eta~ = lr [K - (1 - rho)(K - 1)/2]."""
    return lr * (K - (1.0 - rho) * (K - 1) / 2.0)


def aux(eta_k, beta, mu=None):
    """Per-round auxiliaries of the Thm 5.1 proof recursion for one round's steps ``eta_k`` [K]: dict eta_tilde,
    P, W, D (D_k, k=0..K-1), c.
    mu None: non-convex a_k = 1 + beta eta_k; else strongly convex a_k = 1 - eta_k beta mu/(beta + mu)."""
    eta_k = np.asarray(eta_k, float)
    a = 1.0 + beta * eta_k if mu is None else 1.0 - eta_k * beta * mu / (beta + mu)
    K = len(eta_k)
    W = sum(eta_k[k] * np.prod(a[k + 1:]) for k in range(K))
    D = np.array([sum(eta_k[j] * np.prod(a[j + 1:k]) for j in range(k)) for k in range(K)])
    return {"eta_tilde": float(eta_k.sum()), "P": float(np.prod(a)), "W": float(W), "D": D, "a": a,
            "c": float(1.0 + beta * eta_k[0])}


def c_tilde_printed(K, T):
    """Printed c~ = 1 + (2 + 1/(KT))^{K-1}/T (Thm 5.1 with eta = 1/(beta K T))."""
    return 1.0 + (2.0 + 1.0 / (K * T)) ** (K - 1) / T


def c_tilde_corrected(K, T):
    """Corrected c~ = 1 + (1 + 1/(KT))^{K-1}/T (the proof's (1 + c)^{K-1} read as c^{K-1})."""
    return 1.0 + (1.0 + 1.0 / (K * T)) ** (K - 1) / T


def b_tilde_printed(K, T, mu, beta):
    """Printed b~ = 1 + (mu/((beta+mu) K))^{K-1}/T."""
    return 1.0 + (mu / ((beta + mu) * K)) ** (K - 1) / T


def fedsam_over_fedswa_ratio(K, rho):
    """(c_bar - 1)/(c~ - 1) = K eta_l / eta~ (same eta_l)."""
    return K / lr_sum(1.0, rho, K)


def thm51(pr: SWAProblem, T, K, mo=False, mu=None, multiplier=None, factor2=True):
    """Theorem 5.1: (2L/(m n beta)) e^{E} (x L + y sigma_g + x sigma), x = c~ (NC, E = 1 + 1/T) or b~ (SC,
    E = 1 - mu/((beta+mu)T)); y = x (FedSWA) or 1 (FedMoSWA, ``mo``). ``multiplier`` overrides x (e.g. corrected);
    ``factor2=False`` is Table 1's form (drops the 2)."""
    beta, L, sigma, sigma_g, m, n = pr
    if mu is None:
        x = c_tilde_printed(K, T) if multiplier is None else multiplier
        E = 1.0 + 1.0 / T
    else:
        x = b_tilde_printed(K, T, mu, beta) if multiplier is None else multiplier
        E = 1.0 - mu / ((beta + mu) * T)
    y = 1.0 if mo else x
    return (2.0 if factor2 else 1.0) * L / (m * n * beta) * np.exp(E) * (x * L + y * sigma_g + x * sigma)


def _GT(G, T, L):
    return np.full(T, float(L)) if G is None else np.asarray(G, float)[:T]


def recursion(eta, pr: SWAProblem, G=None, form="corrected", mo=False, gamma=0.2, M0=0.0, alpha=1.0,
              mu: Optional[float] = None, noise_fix=False):
    """Delta_0..Delta_T for local step sizes ``eta`` [T, K]. form "paper" (A), "corrected" (B) or
    "extension" (C: |1 - alpha| + alpha P growth and alpha x the perturbation, on top of (B)). ``mo``: FedMoSWA
    with M_t = (1-gamma) M_{t-1} + gamma (G_t + sigma), M_{-1} = M0. ``mu``: strongly convex (forms A and B).
    ``G``: per-round E||grad F(theta_t)|| (None: the worst case L). Returns Delta [T + 1]."""
    eta = np.atleast_2d(np.asarray(eta, float))
    T, K = eta.shape
    G = _GT(G, T, pr.L)
    pre = 2.0 / (pr.m * pr.n)
    out = np.zeros(T + 1)
    M = M0
    for t in range(T):
        ax = aux(eta[t], pr.beta, mu)
        if mo:
            M = (1 - gamma) * M + gamma * (G[t] + pr.sigma)
        if form == "paper":
            grow, pert = _printed_round(eta[t], ax, pr, G[t], M if mo else None, mu)
        else:
            grow, pert = ax["P"], _corrected_perturbation(eta[t], ax, pr, G[t], M if mo else None, noise_fix)
        if form == "extension":
            out[t + 1] = (abs(1 - alpha) + alpha * grow) * out[t] + alpha * pre * pert
        else:
            out[t + 1] = grow * out[t] + pre * pert
    return out


def _printed_round(eta_t, ax: dict, pr: SWAProblem, G_t, M, mu):
    """(A): the round's growth factor and perturbation as printed (``M``: FedMoSWA's momentum bound, else None)."""
    beta, et, K = pr.beta, ax["eta_tilde"], len(eta_t)
    base = G_t + pr.sigma_g + pr.sigma
    if mu is None:
        grow = np.exp(beta * et)
        ck = (1.0 + ax["c"]) ** (K - 1)
    else:
        grow = np.exp(-et * beta * mu / (beta + mu))
        ck = (eta_t[0] * beta * mu / (beta + mu)) ** (K - 1)  # (1 - b_t)^{K-1}, b_t of E.1
    if M is None:
        return grow, (1.0 + ck * beta * et) * et * grow * base
    if mu is None:
        return grow, et * grow * (base + beta * ck * et * M)
    return grow, et * grow * ((1 + beta * et * ck) * (pr.L + pr.sigma) + pr.sigma_g)


def _corrected_perturbation(eta_t, ax: dict, pr: SWAProblem, G_t, M, noise_fix: bool) -> float:
    """(B): the round's perturbation sum_k w_k (1 + beta D_k) (G_t + sigma_g + sigma) (FedMoSWA: with its M)."""
    a, D, K = ax["a"], ax["D"], len(eta_t)
    base = G_t + pr.sigma_g + pr.sigma
    w = np.array([eta_t[k] * np.prod(a[k + 1:]) for k in range(K)])
    if M is None:
        return float(np.sum(w * (1.0 + pr.beta * D) * base))
    Mx = M + 2 * pr.sigma if noise_fix else M
    return float(np.sum(w * (base + pr.beta * D * Mx)))


def printed_unrolled(eta, pr: SWAProblem, G=None):
    """Eq. (31)/(111) unrolled sum as printed (non-convex FedSWA), with c~ = c~_0 (round 0):
    (2 c~/(m n)) sum_t exp(beta sum_{l>t} eta~_l) eta~_t e^{beta eta~_t} (G_t + sigma_g + sigma)."""
    beta, L, sigma, sigma_g, m, n = pr
    eta = np.atleast_2d(np.asarray(eta, float))
    T, K = eta.shape
    G = _GT(G, T, L)
    et = eta.sum(axis=1)
    ct = 1.0 + (1.0 + (1.0 + beta * eta[0, 0])) ** (K - 1) * beta * et[0]
    tail = np.concatenate([np.cumsum(et[::-1])[::-1][1:], [0.0]])  # sum_{l > t}
    return 2 * ct / (m * n) * float(np.sum(np.exp(beta * tail) * et * np.exp(beta * et) * (G + sigma_g + sigma)))


# --------------------------------------------------------------------------------------------------------------
# registered wrappers
# --------------------------------------------------------------------------------------------------------------
class SWARun(NamedTuple):
    """What the registered FedSWA bounds read from a run."""

    eta: np.ndarray  # [T, K] local step sizes
    pr: SWAProblem
    G: Optional[np.ndarray]  # measured E||grad F(theta_t)|| per round (None: the worst case L)
    mo: bool  # FedMoSWA / FedMo (server momentum)
    alpha: float  # alpha_eff = global lr x alpha
    cond: dict
    derived: dict


def _params(st: Setting) -> SWARun:
    # FedAvg is FedSWA with rho = 1 (constant local lr) and alpha = 1 (plain averaging)
    rho, alpha = (1.0, 1.0) if st.algo == "fedavg" else (float(st.param("rho")), float(st.param("alpha")))
    alpha *= float(st.global_lr)
    eta = local_lrs(st.round_lrs(), rho, st.K)
    beta, L = st.const("L"), st.const("G")
    sigma, sigma_g = np.sqrt(st.const("sigma_l2_sample")), np.sqrt(st.const("sigma_g2_mean"))
    G = np.sqrt(np.asarray(st.measured["grad_norm_sq"], float)) if "grad_norm_sq" in st.measured else None
    mo = st.algo in ("fedmoswa", "fedmo")
    cond = {"full participation s == M (proofs)": bool(st.s == st.M),
            "alpha_eff == 1 (proofs use plain averaging)": bool(abs(alpha - 1.0) < 1e-12),
            "eta_k^t <= 1/(beta K T) (Thm 5.1)": bool(np.all(eta <= 1.0 / (beta * st.K * st.T) * (1 + 1e-12)))}
    if mo:
        cond["Option I control variate (proofs)"] = str(st.param("option")).startswith("I") and \
            str(st.param("option")) != "II"
    der = {"regime max_k eta_k^t beta K T": float(np.max(eta) * beta * st.K * st.T), "rho": rho, "alpha_eff": alpha}
    return SWARun(eta, SWAProblem(beta, L, sigma, sigma_g, st.M, st.n), G, mo, alpha, cond, der)


@register("fedswa", "fedmoswa", "fedmo", "fedavg", name="fedswa.recursion")
def recursion_registered(st: Setting) -> list:
    """Delta_t recursions (non-convex): "paper" (A), "corrected" (B), "extension" (C); strongly convex (A), (B) too
    when the constant ``mu_sc`` is given. derived['gen_gap'] = L Delta_T."""
    r = _params(st)
    eta, L = r.eta, r.pr.L
    kw = dict(G=r.G, mo=r.mo, gamma=float(st.param("gamma")) if r.mo else 0.0)
    out = []
    variants = [("paper", None), ("corrected", None), ("extension", None)]
    mu = st.constants.get("mu_sc")
    if mu:
        variants += [("paper", float(mu)), ("corrected", float(mu))]
    for form, m_ in variants:
        v = recursion(eta, r.pr, form=form, alpha=r.alpha, mu=m_, **kw)
        c = {k: val for k, val in r.cond.items() if not (form == "extension" and ("s == M" in k or "alpha" in k))}
        if m_ is not None:
            c["eta_k^t <= 2/(beta + mu) (SC contraction)"] = bool(np.all(eta <= 2 / (r.pr.beta + m_)))
        cf = None
        if form == "paper" and not r.mo and m_ is None and np.allclose(eta, eta[0]) and r.G is None:
            cf = np.array([printed_unrolled(eta[:t], r.pr) if t else 0.0 for t in range(st.T + 1)])
        out.append(Bound("fedswa.recursion" + ("_sc" if m_ is not None else ""), st.algo, "disc",
                         form if form != "extension" else "extension",
                         f"{SRC} Thm 5.1 proof recursion, {_FORM_WORDS[form]}", v,
                         closed_form=cf, conditions=c, derived=dict(r.derived, gen_gap=L * v[-1]),
                         note="extension: not in the paper" if form == "extension" else ""))
    return out


@register("fedswa", "fedmoswa", "fedmo", "fedavg", name="fedswa.thm51")
def thm51_registered(st: Setting) -> list:
    """Theorem 5.1 (non-convex) at horizons t = 1..T: printed c~ ("paper"), corrected c~ ("corrected"),
    Table 1 (no factor 2, printed c~). Assumes eta = 1/(beta K T) (its own condition flag)."""
    r = _params(st)
    t = np.arange(1, st.T + 1, dtype=float)
    out = []
    for form, mult, f2 in (("paper", None, True), ("corrected", c_tilde_corrected(st.K, t), True),
                           ("table1", None, False)):
        v = np.concatenate([[0.0], thm51(r.pr, t, st.K, mo=r.mo, multiplier=mult, factor2=f2)])
        out.append(Bound("fedswa.thm51", st.algo, "gen_gap", form, f"{SRC} Thm 5.1 / Table 1", v,
                         conditions=dict(r.cond), derived=dict(r.derived, c_tilde_printed=c_tilde_printed(st.K, st.T))))
    return out
