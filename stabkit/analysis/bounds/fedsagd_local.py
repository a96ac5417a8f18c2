"""FedSAGD paper: local-update stability bounds vs the local step k (App. C per-step recursions).

LocalStab(k) bounds ``E||x^i_{t,k} - x^j_{t,k}||`` for two clients entering round t with the same model
(``D_t = 0``), k = 0..K. Two forms:

* ``paper``: the App. C per-step bounds with D_t = 0, the paper's worst-case treatment of server-state differences
  (``||v_t - v'_t|| <= 2 Theta`` and the like);
* ``l1``: bounds derived here for the L1 estimator (two clients of the *same* run in the same round share
  the server state exactly, so those terms vanish).

Each bound is the per-step recursion ``d_{k+1} = a d_k + b_k`` (values) plus its closed form; each algorithm's
per-step function is its table row's (:mod:`stabkit.analysis.bounds.fedsagd_table`, functions in
:mod:`~stabkit.analysis.bounds.fedsagd_steps`). Engine weight decay adds the condition
``eta_l (lambda + w) <= 1`` where it only contracts (lambda: the algorithm's prox weight, 0 if none).
Plain-number entry point: :func:`local_bound`. Registered for every algorithm of Table 1 (and FedAvgM).
"""
from __future__ import annotations

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, iterate, register
from stabkit.analysis.bounds.fedsagd_rounds import local_beta
from stabkit.analysis.bounds.fedsagd_steps import StepInputs
from stabkit.analysis.bounds.fedsagd_table import TABLE, entry, prox_weight, wd_condition

SRC = "FedSAGD local-update bounds"
LOCAL_ALGOS = tuple(TABLE)

__all__ = ["LOCAL_ALGOS", "local_beta", "local_bound", "local_bounds", "wd_condition"]


def local_bound(algo: str, K: int, eta_l: float, theta: float, form: str = "paper", **hp):
    """``(values[k], closed_form[k], conditions)`` for k = 0..K from explicit numbers.

    ``hp``: the algorithm's hyperparameters by its own names (a run's ``hp_resolved``); the bound reads those it
    needs: ``beta`` (FedLNAG, FedANAG, MimeLite; FedSAGD's local weight on v_t unless ``beta_local`` is set),
    ``lam`` (prox weight of FedProx, FedDyn, FedSAGD), ``mu`` (FedSAGD's weight decay), ``alpha`` (FedCM's
    fresh-gradient weight).
    """
    if form not in ("paper", "l1"):
        raise ValueError(f"form must be 'paper' or 'l1', not {form!r}")
    a, b, closed, cond = entry(algo, "local").local(StepInputs(algo, K, eta_l, theta, form == "l1", hp))
    values = iterate(a, b) if K > 0 else np.zeros(1)
    return values, closed, cond


@register(*TABLE, name="fedsagd.local")
def local_bounds(setting: Setting) -> list:
    """Paper and L1 local bounds at round 0 (and at the middle round when the lr is scheduled)."""
    theta = setting.const("theta_max")
    lr = np.atleast_1d(np.asarray(setting.lr, float))
    rounds = [0] if np.allclose(lr, lr[0]) or len(lr) < 2 else [0, len(lr) // 2]
    lam = prox_weight(setting.algo, setting.hp, setting.param)
    out = []
    for t in rounds:
        for form in ("paper", "l1"):
            values, closed, cond = local_bound(setting.algo, setting.K, float(lr[t]), theta, form, **setting.hp)
            cond.update(wd_condition(setting.algo, setting.weight_decay, float(lr[t]), lam))
            suffix = "" if t == 0 else f".round{t}"
            out.append(Bound(f"fedsagd:{setting.algo}.local_{form}{suffix}", setting.algo, "local_disc", form,
                             SRC, values, closed_form=closed, conditions=cond,
                             derived={"round": t, "eta_l": float(lr[t]), "theta": theta},
                             note="D_t = 0; Theta = theta_max" + ("; L1 estimator: shared server state"
                                                                  if form == "l1" else "")))
    return out
