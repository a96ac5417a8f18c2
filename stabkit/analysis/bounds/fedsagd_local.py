"""FedSAGD paper: local-update stability bounds vs the local step k (fedsagd.md §1.3, §3.2 per-step recursions, §3.4).

LocalStab(k) bounds ``E||x^i_{t,k} - x^j_{t,k}||`` for two clients entering round t with the same model
(``D_t = 0``), k = 0..K. Two forms:

* ``paper``: the §3.4 table, the paper's worst-case treatment of server-state differences
  (``||v_t - v'_t|| <= 2 Theta`` and the like);
* ``l1``: the [DERIVED] bounds for the L1 estimator (two clients of the *same* run in the same round share
  the server state exactly, so those terms vanish; §3.4 second table).

Each bound is the per-step recursion ``d_{k+1} = a d_k + b_k`` (values) plus its closed form.
Plain-number entry point: :func:`local_bound`. Registered for every algorithm of Table 1 (and FedAvgM).
"""
from __future__ import annotations

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, hp_value, iterate, register

SRC = "fedsagd.md §3.4"

# Linear (no-prox) methods: per-step increment c * eta_l * Theta (paper form, L1 form); beta-dependent ones below.
_LINEAR = {"fedavg": (2.0, 2.0), "fedadam": (2.0, 2.0), "fedacg": (2.0, 2.0), "fedavgm": (2.0, 2.0),
           "scaffold": (6.0, 4.0)}
_PROX = {"fedprox": 2.0, "feddyn": 4.0}  # increment c eta_l Theta, contraction (1 - lambda eta_l)
# Engine weight decay w (g <- g + w y) only adds a contraction (1 - eta_l w) to these methods' local steps, so
# their bounds stay valid; in the others it enters a momentum / control / server state the analysis bounds by
# Theta (or the update norm), so their bounds need w = 0.
WD_CONTRACTS = ("fedavg", "fedprox", "feddyn", "fedsagd")
PROX_LAM = ("fedprox", "feddyn", "fedsagd")  # their lam is a prox weight (FedACG's lam is a server momentum)
LOCAL_ALGOS = ("fedavg", "fedprox", "scaffold", "feddyn", "fedlnag", "fedadam", "fedcm", "mimelite", "fedacg",
               "fedanag", "fedavgm", "fedsagd")


def _one_minus_q_over(rate: float, eta_l: float, k):
    """``(1 - (1 - eta_l rate)^k) / rate``, with its limit ``eta_l k`` at rate = 0."""
    k = np.asarray(k, float)
    if rate == 0:
        return eta_l * k
    return (1.0 - (1.0 - eta_l * rate) ** k) / rate


def local_bound(algo: str, K: int, eta_l: float, theta: float, form: str = "paper", **hp):
    """``(values[k], closed_form[k], conditions)`` for k = 0..K from explicit numbers.

    ``hp``: the algorithm's hyperparameters by its own names (a run's ``hp_resolved``); the bound reads those it
    needs: ``beta`` (FedLNAG, FedANAG, MimeLite; FedSAGD's local weight on v_t unless ``beta_local`` is set),
    ``lam`` (prox weight of FedProx, FedDyn, FedSAGD), ``mu`` (FedSAGD's weight decay), ``alpha`` (FedCM's
    fresh-gradient weight).
    """
    if form not in ("paper", "l1"):
        raise ValueError(f"form must be 'paper' or 'l1', not {form!r}")
    if algo not in LOCAL_ALGOS:
        raise ValueError(f"no FedSAGD-paper local bound for {algo!r}")
    k = np.arange(K + 1, dtype=float)
    l1 = form == "l1"
    cond = {}
    if algo in _LINEAR or algo in ("fedcm", "mimelite", "fedanag"):
        if algo in _LINEAR:
            c = _LINEAR[algo][1 if l1 else 0]
        elif algo == "fedcm":
            c = 2.0 * hp_value(hp, algo, "alpha") if l1 else 2.0
        elif algo == "mimelite":
            c = 2.0 * (1.0 - hp_value(hp, algo, "beta")) if l1 else 2.0
        else:  # fedanag
            beta = hp_value(hp, algo, "beta")
            c = 2.0 * (1.0 + beta) if l1 else 2.0 / (1.0 - beta)
            cond["beta < 1"] = beta < 1
        a, b = 1.0, np.full(K, c * eta_l * theta)
        closed = c * eta_l * theta * k
    elif algo == "fedlnag":  # ||m_{k+1}|| <= (1 - beta^{k+1}) Theta (damped, reset momentum)
        beta = hp_value(hp, algo, "beta")
        a, b = 1.0, 2.0 * eta_l * theta * (1.0 - beta ** np.arange(1, K + 1))
        closed = 2.0 * eta_l * theta * (k - (beta * (1.0 - beta ** k) / (1.0 - beta) if beta < 1 else 0.0))
        cond["beta < 1"] = beta < 1
    elif algo in _PROX:
        c, lam = _PROX[algo], hp_value(hp, algo, "lam")
        a, b = 1.0 - lam * eta_l, np.full(K, c * eta_l * theta)
        closed = c * theta * _one_minus_q_over(lam, eta_l, k)
        cond["lambda > 0 (else the O(K) FedAvg limit)"] = lam > 0
        cond["eta_l * lambda <= 1"] = eta_l * lam <= 1
    else:  # fedsagd
        beta = local_beta(hp)
        rate = hp_value(hp, algo, "lam") + hp_value(hp, algo, "mu")
        c = 2.0 if l1 else 2.0 + 2.0 * beta
        a, b = 1.0 - eta_l * rate, np.full(K, c * eta_l * theta)
        closed = c * theta * _one_minus_q_over(rate, eta_l, k)
        cond["0 < eta_l (lambda + mu) <= 1"] = 0 < eta_l * rate <= 1
    values = iterate(a, b) if K > 0 else np.zeros(1)
    return values, closed, cond


def local_beta(hp: dict) -> float:
    """FedSAGD's weight of v_t in the local step (line 9), the beta of its bounds: ``beta_local``, or ``beta``
    when that is unset (none or not given), as in the algorithm."""
    beta = hp.get("beta_local")
    return hp_value(hp, "fedsagd", "beta") if beta is None else beta


def wd_condition(algo: str, w: float, eta_l_max: float, lam: float = 0.0) -> dict:
    """The weight-decay validity condition of a Table-1 bound (the table ignores weight decay, §3.6 item 3)."""
    if not w:
        return {}
    if algo in WD_CONTRACTS:
        return {"engine weight decay only contracts: eta_l (lambda + w) <= 1": eta_l_max * (lam + w) <= 1}
    return {"no engine weight decay (enters a state/update norm the analysis bounds by Theta)": False}


@register(*LOCAL_ALGOS, name="fedsagd.local")
def local_bounds(setting: Setting) -> list:
    """§3.4 paper and L1 local bounds at round 0 (and at the middle round when the lr is scheduled)."""
    theta = setting.const("theta_max")
    lr = np.atleast_1d(np.asarray(setting.lr, float))
    rounds = [0] if np.allclose(lr, lr[0]) or len(lr) < 2 else [0, len(lr) // 2]
    out = []
    for t in rounds:
        for form in ("paper", "l1"):
            values, closed, cond = local_bound(setting.algo, setting.K, float(lr[t]), theta, form, **setting.hp)
            cond.update(wd_condition(setting.algo, setting.weight_decay, float(lr[t])))
            suffix = "" if t == 0 else f".round{t}"
            out.append(Bound(f"fedsagd:{setting.algo}.local_{form}{suffix}", setting.algo, "local_disc", form,
                             SRC, values, closed_form=closed, conditions=cond,
                             derived={"round": t, "eta_l": float(lr[t]), "theta": theta},
                             note="D_t = 0; Theta = theta_max" + ("; L1 estimator: shared server state"
                                                                  if form == "l1" else "")))
    return out
