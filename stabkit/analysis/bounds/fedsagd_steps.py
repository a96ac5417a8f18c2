"""FedSAGD paper: the per-step coefficients of each algorithm's local bound (App. C, with D_t = 0).

One function per algorithm family, ``step(r: StepInputs) -> (a, b, closed, conditions)`` for the recursion
``d_{k+1} = a d_k + b_k`` over the K local steps (``b`` of length K) and its closed form at k = 0..K. ``r.l1``
selects the derived L1-estimator form (two clients of one run share the server state exactly) over the
paper's worst case. The algorithm's table entry (:mod:`stabkit.analysis.bounds.fedsagd_table`) names its
function.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from stabkit.analysis.bounds.base import contraction_sum, hp_value
from stabkit.analysis.bounds.fedsagd_rounds import local_beta


class StepInputs(NamedTuple):
    """What a local-bound function reads: K, the round's lr and Theta, the form and the hyperparameters."""

    algo: str
    K: int
    eta_l: float
    theta: float
    l1: bool  # the L1-estimator form (else the paper's)
    hp: dict

    @property
    def k(self) -> np.ndarray:
        return np.arange(self.K + 1, dtype=float)

    def need(self, name: str):
        return hp_value(self.hp, self.algo, name)


def linear(c_paper: float, c_l1: float) -> Callable:
    """No contraction, increment ``c eta_l Theta`` per step (c of the paper form, of the L1 form)."""
    return linear_in(lambda r: (c_l1 if r.l1 else c_paper, {}))


def linear_in(c_of: Callable) -> Callable:
    """No contraction, increment ``c eta_l Theta`` with ``c, conditions = c_of(r)`` read from the hyperparameters."""
    def step(r: StepInputs):
        c, cond = c_of(r)
        return 1.0, np.full(r.K, c * r.eta_l * r.theta), c * r.eta_l * r.theta * r.k, cond
    return step


def fedcm_c(r: StepInputs):
    """FedCM: the fresh-gradient weight alpha scales the L1 increment."""
    return (2.0 * r.need("alpha") if r.l1 else 2.0), {}


def mimelite_c(r: StepInputs):
    """MimeLite: the (1 - beta) weight of the fresh gradient scales the L1 increment."""
    return (2.0 * (1.0 - r.need("beta")) if r.l1 else 2.0), {}


def fedanag_c(r: StepInputs):
    """FedANAG: (1 + beta) g plus the shared server state (L1), or its geometric bound 2/(1 - beta) (paper)."""
    beta = r.need("beta")
    return (2.0 * (1.0 + beta) if r.l1 else 2.0 / (1.0 - beta)), {"beta < 1": beta < 1}


def fedlnag(r: StepInputs):
    """``||m_{k+1}|| <= (1 - beta^{k+1}) Theta`` (damped, reset momentum)."""
    beta, K, k = r.need("beta"), r.K, r.k
    b = 2.0 * r.eta_l * r.theta * (1.0 - beta ** np.arange(1, K + 1))
    closed = 2.0 * r.eta_l * r.theta * (k - (beta * (1.0 - beta ** k) / (1.0 - beta) if beta < 1 else 0.0))
    return 1.0, b, closed, {"beta < 1": beta < 1}


def prox(c: float) -> Callable:
    """FedProx (c = 2), FedDyn (c = 4): contraction ``1 - lam eta_l``, increment ``c eta_l Theta``."""
    def step(r: StepInputs):
        lam, eta_l = r.need("lam"), r.eta_l
        cond = {"lambda > 0 (else the O(K) FedAvg limit)": lam > 0, "eta_l * lambda <= 1": eta_l * lam <= 1}
        closed = c * r.theta * contraction_sum(lam, eta_l, r.k)
        return 1.0 - lam * eta_l, np.full(r.K, c * eta_l * r.theta), closed, cond
    return step


def fedsagd(r: StepInputs):
    """Contraction ``1 - eta_l (lam + mu)``, increment ``(2 + 2 beta) eta_l Theta`` (paper) or ``2 eta_l Theta``
    (L1: the server state v_t is shared)."""
    beta = local_beta(r.hp)
    rate, eta_l = r.need("lam") + r.need("mu"), r.eta_l
    c = 2.0 if r.l1 else 2.0 + 2.0 * beta
    closed = c * r.theta * contraction_sum(rate, eta_l, r.k)
    return 1.0 - eta_l * rate, np.full(r.K, c * eta_l * r.theta), closed, \
        {"0 < eta_l (lambda + mu) <= 1": 0 < eta_l * rate <= 1}

