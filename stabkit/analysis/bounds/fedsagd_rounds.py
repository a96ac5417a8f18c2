"""FedSAGD paper: the per-round coefficients ``(a_t, b_t)`` of each Table-1 algorithm's global bound (App. C).

One function per algorithm, ``coeffs(r: RoundInputs) -> (a, b, conditions)``, for ``D_{t+1} <= a_t D_t + b_t``;
``a`` and ``b`` may be scalars or length-T arrays (broadcast by the caller). The algorithm's table entry
(:mod:`stabkit.analysis.bounds.fedsagd_table`) names its function; the global-lr extension, the eta = 1 and the
weight-decay conditions every algorithm shares are added by :func:`stabkit.analysis.bounds.fedsagd.round_coeffs`.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional

import numpy as np

from stabkit.algorithms.fedsagd import local_weight
from stabkit.analysis.bounds.base import contraction_sum, hp_value, iterate


class RoundInputs(NamedTuple):
    """What a coefficient function reads: the form, the run's numbers (lr, Theta per round) and hyperparameters."""

    algo: str
    form: str
    K: int
    lr: np.ndarray  # [T] client lr per round
    theta: np.ndarray  # [T] Theta per round
    eta: float  # global lr
    w: float  # engine weight decay
    v_sum: Optional[np.ndarray]  # measured ||v_t|| + ||v'_t|| (FedSAGD rigorous)
    h_sum: Optional[np.ndarray]  # measured ||h_i|| + ||h'_j|| (FedDyn rigorous)
    hp: dict

    @property
    def T(self) -> int:
        return len(self.lr)

    @property
    def eK(self) -> np.ndarray:
        return self.lr * self.K

    def need(self, name: str):
        """A hyperparameter the bound reads (ValueError naming a missing one)."""
        return hp_value(self.hp, self.algo, name)


def local_beta(hp: dict) -> float:
    """FedSAGD's weight of v_t in the local step, the beta of its bounds, from the run's hyperparameters
    (:func:`stabkit.algorithms.fedsagd.local_weight`; ``beta_local`` not given reads as unset)."""
    return local_weight(hp_value(hp, "fedsagd", "beta"), hp.get("beta_local"))


def fedsagd_constants(eta_l, K: int, lam: float, mu: float) -> dict:
    """Thm C.12: ``q = (1 - eta_l(lam+mu))^K``, ``zeta = (1-q)/(lam+mu)``, ``Gamma = mu zeta`` (arrays allowed)."""
    eta_l = np.asarray(eta_l, float)
    rate = lam + mu
    zeta = contraction_sum(rate, eta_l, K)
    return {"q": (1.0 - eta_l * rate) ** K, "zeta": zeta, "Gamma": mu * zeta}


def linear(c: float) -> Callable:
    """``b_t = c eta_l K Theta`` (FedAvg, MimeLite: c = 2; SCAFFOLD: c = 6), no contraction."""
    def coeffs(r: RoundInputs):
        return 1.0, c * r.eK * r.theta, {}
    return coeffs


def fedavg(r: RoundInputs):
    """Table 1, and the ``wd`` form: engine weight decay contracts each local step by (1 - eta_l w)."""
    if r.form != "wd":
        return linear(2)(r)
    cond = {"weight decay w > 0": r.w > 0, "eta_l w <= 1": bool(np.all(r.lr * r.w <= 1))}
    return (1 - r.lr * r.w) ** r.K, 2 * r.theta * contraction_sum(r.w, r.lr, r.K), cond


def prox(c: float) -> Callable:
    """FedProx (c = 2) and FedDyn (c = 4): ``b_t = c Theta (1 - (1 - lam eta_l)^K) / lam``; FedDyn's
    ``rigorous`` form reads the measured client-state norms instead of bounding ||h_i|| by Theta."""
    def coeffs(r: RoundInputs):
        lam = r.need("lam")
        if r.form == "rigorous":
            if r.h_sum is None:
                raise ValueError("FedDyn rigorous form needs h_sum (measured ||h_i|| + ||h'_j||)")
            b = (2 * r.theta + np.asarray(r.h_sum, float)[:r.T]) * contraction_sum(lam, r.lr, r.K)
        else:
            b = c * r.theta * contraction_sum(lam, r.lr, r.K)
        return 1.0, b, {"lambda > 0": lam > 0, "eta_l lambda <= 1": bool(np.all(r.lr * lam <= 1))}
    return coeffs


def fedlnag(r: RoundInputs):
    """``2 eta_l K Theta``; ``tight``: the damped momentum's ``(1 - beta^{k+1})`` summed over the K steps."""
    beta, lr, K = r.need("beta"), r.lr, r.K
    b = 2 * r.eK * r.theta if r.form != "tight" else 2 * lr * r.theta * (K - beta * (1 - beta ** K) / (1 - beta))
    return 1.0, b, {"beta < 1": beta < 1}


def fedadam(r: RoundInputs):
    """``(2/tau) eta_l K Theta`` as printed; the ``eta`` form multiplies by the global lr (the paper is unclear)."""
    b = (2 / r.need("tau")) * r.eK * r.theta * (r.eta if r.form == "eta" else 1.0)
    cond = {"eta <= 1 (the printed bound drops the global lr)": r.eta <= 1} if r.form == "paper" else {}
    return 1.0, b, cond


def fedcm(r: RoundInputs):
    """``paper``: ``b = 2 Theta`` (eta_l K >= 1); ``corrected``: the general step ``c = eta_g / (eta_l K)``."""
    gradient_units = r.need("server") == "gradient"
    if r.form == "paper":
        return 1.0, np.full(r.T, 2.0) * r.theta, {
            "eta_l K >= 1 (the paper's coefficient 1 - 1/(eta_l K) >= 0)": bool(np.all(r.eK >= 1)),
            "server in gradient units (the analysed parametrisation)": gradient_units,
            "global lr eta = 1 (the paper's stability analysis)": r.eta == 1}
    c = r.eta / r.eK if gradient_units else np.full(r.T, float(r.eta))
    return np.abs(1 - c) + c, 2 * c * r.eK * r.theta, {}


def fedacg(r: RoundInputs):
    """``(4 - 2 lam)/(1 - lam) eta_l K Theta``; ``round``/``round_lam``: the momentum norm bound per round
    (two readings of the paper's sum: (1 - lam^t)/(1 - lam) or lam (1 - lam^t)/(1 - lam))."""
    lam, eK = r.need("lam"), r.eK
    cond = {"lambda < 1": lam < 1,
            "eta_l beta_acg <= 1 (the analysis omits the local penalty)": bool(np.all(r.lr * r.need("beta_acg") <= 1))}
    if r.form in ("round", "round_lam"):
        M = iterate(lam, eK * r.theta)[:r.T]  # ||m_t|| <= eta_l K Theta (1 - lam^t)/(1 - lam)
        return 1.0, 2 * eK * r.theta + 2 * (lam if r.form == "round_lam" else 1.0) * M, cond
    return 1.0, (4 - 2 * lam) / (1 - lam) * eK * r.theta, cond


def fedanag(r: RoundInputs):
    """``2/(1 - beta) eta_l K Theta``; ``round``: the server state's norm bound per round."""
    beta = r.need("beta")
    if r.form == "round":
        V = iterate(beta, r.theta)[:r.T]  # ||v_t|| <= Theta (1 - beta^t)/(1 - beta)
        return 1.0, 2 * r.eK * ((1 + beta) * r.theta + beta ** 2 * V), {"beta < 1": beta < 1}
    return 1.0, 2 / (1 - beta) * r.eK * r.theta, {"beta < 1": beta < 1}


def fedavgm(r: RoundInputs):
    """Derived (FedAvgM is not in the paper): ``b_t = 2 eta ||m_{t+1}||`` with the momentum buffer bounded by
    its geometric sum."""
    M = iterate(r.need("beta"), r.eK * r.theta)[1:]  # ||m_{t+1}||
    return 1.0, 2 * r.eta * M, {}


def fedsagd(r: RoundInputs):
    """Theorem / Table 1 (``a = 1 - Gamma``), ``rigorous`` (measured ||v||), ``theorem_wd`` (mu + w)."""
    beta, lam, lr = local_beta(r.hp), r.need("lam"), r.lr
    mu_eff = r.need("mu") + (r.w if r.form == "theorem_wd" else 0.0)
    k = fedsagd_constants(lr, r.K, lam, mu_eff)
    if r.form == "table1":
        b = (2 + 2 * beta) * r.theta / (lam + mu_eff) if lam + mu_eff > 0 else np.full(r.T, np.inf)
    elif r.form == "rigorous":
        if r.v_sum is None:
            raise ValueError("FedSAGD rigorous form needs v_sum (measured ||v_t|| + ||v'_t||)")
        b = k["zeta"] * (2 * r.theta + beta * np.asarray(r.v_sum, float)[:r.T])
    else:
        b = k["zeta"] * (2 + 2 * beta) * r.theta
    step = lr * (lam + mu_eff)
    cond = {"mu > 0 (else Gamma = 0: no saturation)": mu_eff > 0, "lambda >= 0": lam >= 0,
            "0 < eta_l (lambda + mu) <= 1": bool(np.all((step > 0) & (step <= 1))),
            "0 < Gamma < 1": bool(np.all((k["Gamma"] > 0) & (k["Gamma"] < 1)))}
    if r.form == "theorem_wd":
        cond["engine weight decay w > 0"] = r.w > 0
    return 1 - k["Gamma"], b, cond


# ----------------------------------------------------------------------------------- closed forms (constant lr)
# ``closed(r, t) -> D_t`` at t = 0..T for a scalar lr and Theta, where one exists the generic geometric
# sum of (a, b) does not (None: use the generic one).

def fedavg_closed(r: RoundInputs, t: np.ndarray):
    if r.form == "wd":
        return 2 * r.theta / r.w * (1 - (1 - r.lr * r.w) ** (r.K * t))
    return None


def fedsagd_closed(r: RoundInputs, t: np.ndarray):
    """Thm C.12 closed form: ``scale (2 + 2 beta) Theta (1 - (1 - Gamma)^t) / mu``
    (Table 1: scale = 1/((lam + mu) zeta))."""
    if r.form not in ("theorem", "theorem_wd", "table1"):
        return None
    beta, lam, mu = local_beta(r.hp), r.need("lam"), r.need("mu") + (r.w if r.form == "theorem_wd" else 0.0)
    if mu <= 0:
        return None
    k = fedsagd_constants(r.lr, r.K, lam, mu)
    scale = 1.0 if r.form != "table1" else 1.0 / ((lam + mu) * float(k["zeta"]))
    return scale * (2 + 2 * beta) * r.theta * (1 - (1 - k["Gamma"]) ** t) / mu


def fedacg_closed(r: RoundInputs, t: np.ndarray):
    if r.form not in ("round", "round_lam"):
        return None
    lam = r.need("lam")
    f = lam if r.form == "round_lam" else 1.0
    return 2 * r.eK * r.theta * (t + f * (t - (1 - lam ** t) / (1 - lam)) / (1 - lam))


def fedanag_closed(r: RoundInputs, t: np.ndarray):
    if r.form != "round":
        return None
    beta = r.need("beta")
    return 2 * r.eK * r.theta * ((1 + beta) * t + beta ** 2 * (t - (1 - beta ** t) / (1 - beta)) / (1 - beta))


def fedavgm_closed(r: RoundInputs, t: np.ndarray):
    beta = r.need("beta")
    return 2 * r.eta * r.eK * r.theta / (1 - beta) * (t - beta * (1 - beta ** t) / (1 - beta))


# ------------------------------------------------------------------------------------- FedSAGD's derived numbers

def crossover_vs_fedavg(fsagd, favg) -> Optional[int]:
    """Smallest T >= 1 with ``fsagd(T) < favg(T)``; both callables concave-vs-linear (single crossing)."""
    if fsagd(1) < favg(1):
        return 1
    hi = 2
    while not fsagd(hi) < favg(hi):
        hi *= 2
        if hi > 2 ** 60:
            return None
    lo = hi // 2  # fsagd(lo) >= favg(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fsagd(mid) < favg(mid) else (mid, hi)
    return hi


def fedsagd_derived(eta_l: float, K: int, beta: float, lam: float, mu: float, theta: float,
                    form: str = "theorem", v_max: Optional[float] = None) -> dict:
    """Gamma, zeta, q, 1/Gamma, asymptote and the crossover T against FedAvg (constant lr)."""
    k = {n: float(v) for n, v in fedsagd_constants(eta_l, K, lam, mu).items()}
    G = k["Gamma"]
    out = {**k, "time_constant": 1 / G if G > 0 else math.inf}
    if mu <= 0 or G <= 0:
        return {**out, "asymptote": math.inf, "crossover_T_vs_fedavg": None}
    scale = 1.0 / ((lam + mu) * k["zeta"]) if form == "table1" else 1.0
    if form == "rigorous" and v_max is not None:
        level = (2 * theta + 2 * beta * v_max) / mu
    else:
        level = scale * (2 + 2 * beta) * theta / mu
    out["asymptote"] = level
    out["crossover_T_vs_fedavg"] = crossover_vs_fedavg(lambda T: level * (1 - (1 - G) ** T),
                                                       lambda T: 2 * eta_l * K * theta * T)
    return out
