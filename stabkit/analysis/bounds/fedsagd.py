"""FedSAGD paper: global-update stability bounds of Table 1 / App. C as per-round recursions (docs/bounds-reference.md).

``D_{t+1} <= a_t D_t + b_t`` with ``D_0 = 0`` and ``D_t = E||x_t - x'_t||``, evaluated with the run's lr
``eta_l(t)`` and ``Theta = constants['theta_max']`` (plus a per-round variant from ``measured['theta_t']``).
Forms (Bound.form):

* ``paper``      Table 1 / App. C as printed (the paper assumes global lr eta = 1; flagged when it is not);
* ``corrected``  the global-lr extension ``a_eta = |1-eta| + eta a``, ``b_eta = eta b`` (FedCM: the general
  ``c = eta_g/(eta_l K)`` step, valid for eta_l K < 1 too); identical to ``paper`` at eta = 1;
* extra forms: FedLNAG ``tight``; FedAdam ``eta`` (the bound times eta: the printed one may drop the global lr);
  FedACG ``round`` and ``round_lam`` (two readings of the paper's round-dependent momentum norm); FedANAG
  ``round``; FedAvgM ``derived``; FedDyn ``rigorous`` (measured ``state_norm_sum/h_i``); FedAvg ``wd``
  (weight-decay control derived like Table 1, only when the run has weight decay); FedSAGD ``table1`` /
  ``theorem`` / ``rigorous`` (measured ``state_norm_sum/v``: the proof's ||v_t|| <= Theta fails) / ``corrected``
  (theorem + eta extension) / ``theorem_wd`` (mu + engine weight decay).

Weight decay (the engine adds ``w y`` to every algorithm's gradient): Table 1 ignores it, although the
authors' code runs every baseline with weight decay 1e-3.
We keep the Table-1 baselines as printed and flag validity instead: for FedAvg/FedProx/FedDyn/FedSAGD the wd term
only adds a contraction, so the bounds stay valid (condition ``eta_l (lambda + w) <= 1``); for the others it
enters a state or update norm the proof bounds by Theta, so the condition "no weight decay" is False. The tighter
wd-aware forms are FedAvg ``wd`` and FedSAGD ``theorem_wd``.

What differs between the algorithms is one table row each (:mod:`stabkit.analysis.bounds.fedsagd_table`): the
per-round coefficients live in :mod:`~stabkit.analysis.bounds.fedsagd_rounds`, the local bounds in
:mod:`~stabkit.analysis.bounds.fedsagd_local`. Plain-number entry points: :func:`round_coeffs`,
:func:`closed_form`, :func:`evaluate` (every output from plain numbers), :func:`fedsagd_constants`,
:func:`crossover_vs_fedavg`, :func:`theta_lemma_c1`.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, geometric_closed, iterate, register
from stabkit.analysis.bounds.fedsagd_local import local_bound
from stabkit.analysis.bounds.fedsagd_rounds import (
    RoundInputs,
    crossover_vs_fedavg,
    fedsagd_constants,
    fedsagd_derived,
    local_beta,
)
from stabkit.analysis.bounds.fedsagd_table import TABLE, prox_weight, wd_condition

SRC = "FedSAGD Table 1"
FORMS = {algo: e.forms for algo, e in TABLE.items()}
ETA_ONE = "global lr eta = 1 (the paper's stability analysis)"

__all__ = ["FORMS", "closed_form", "crossover_vs_fedavg", "evaluate", "fedsagd_constants", "fedsagd_derived",
           "global_bounds", "round_coeffs", "theta_lemma_c1"]


def theta_lemma_c1(sigma_l: float, sigma_g: float, phi: float) -> float:
    """Lemma C.1: ``Theta = sqrt(sigma_l^2 + 2 sigma_g^2 + 2 Phi)`` (Phi is a squared gradient norm)."""
    return math.sqrt(sigma_l ** 2 + 2 * sigma_g ** 2 + 2 * phi)


def round_coeffs(algo: str, form: str, K: int, lr, theta, eta: float = 1.0, w: float = 0.0, v_sum=None, h_sum=None,
                 **hp):
    """``(a_t, b_t, conditions)`` of the per-round recursion, t = 0..T-1, from explicit numbers.

    ``lr``, ``theta``: length-T arrays (or scalars, broadcast to each other). ``hp``: the algorithm's
    hyperparameters by its own names (a run's ``hp_resolved``); the bound reads those it needs: ``lam`` (FedProx,
    FedDyn, FedSAGD: prox weight; FedACG: server momentum), ``beta``, ``mu``, ``tau`` (FedAdam), ``beta_acg``
    (FedACG), ``server`` (FedCM: 'gradient' = the analysed eta_g = eta in gradient units, 'model' = x + eta mean d).
    Run quantities: ``w`` engine weight decay, ``v_sum`` / ``h_sum`` measured ``||v_t|| + ||v'_t||`` /
    ``||h_i|| + ||h'_j||`` (length T).
    """
    if algo not in TABLE:
        raise ValueError(f"no FedSAGD-paper global bound {algo}.{form}")
    e = TABLE[algo]
    lr, theta = np.broadcast_arrays(np.atleast_1d(np.asarray(lr, float)), np.atleast_1d(np.asarray(theta, float)))
    r = RoundInputs(algo, form, K, lr, theta, eta, w, v_sum, h_sum, hp)
    a, b, cond = e.coeffs(r)
    a, b = np.broadcast_to(np.asarray(a, float), (r.T,)).copy(), np.broadcast_to(np.asarray(b, float), (r.T,)).copy()
    if form == "corrected" and e.eta_extension:
        a, b = abs(1 - eta) + eta * a, eta * b
    elif form in e.eta_one:
        cond[ETA_ONE] = eta == 1
    if form not in e.own_wd_forms:
        cond.update(wd_condition(algo, w, float(np.max(lr)), prox_weight(algo, hp, r.need)))
    return a, b, cond


def closed_form(algo: str, form: str, T: int, K: int, eta_l: float, theta: float, eta: float = 1.0, w: float = 0.0,
                **hp):
    """Closed form ``D_t``, t = 0..T, for a constant lr and scalar Theta (None where there is none);
    ``w`` and ``hp`` as in :func:`round_coeffs`."""
    if form == "rigorous":
        return None
    t = np.arange(T + 1, dtype=float)
    special = TABLE[algo].closed if algo in TABLE else None
    if special is not None:
        values = special(RoundInputs(algo, form, K, eta_l, theta, eta, w, None, None, hp), t)
        if values is not None:
            return values
    a, b, _ = round_coeffs(algo, form, K, eta_l, theta, eta, w=w, **hp)
    return geometric_closed(float(a[0]), float(b[0]), t)


def evaluate(algorithm: str, K: int, T: int, eta_l: float, theta=None, form: Optional[str] = None,
             lr_decay: float = 1.0, **run) -> dict:
    """All outputs from explicit numbers: ``bound_global`` (t = 0..T), ``closed_form``, ``bound_local`` and
    ``bound_local_l1`` (k = 0..K, round 0), ``conditions``, ``derived``.

    Theta: scalar, per-round array (length T), or via Lemma C.1 from the keywords ``sigma_l``, ``sigma_g``,
    ``phi``. ``form`` defaults to the algorithm's first form; ``run`` holds ``eta`` (global lr),
    ``w``, ``v_sum``, ``h_sum`` as in :func:`round_coeffs` and the algorithm's hyperparameters.
    """
    rq = {k: run.pop(k) for k in ("eta", "w", "v_sum", "h_sum") if k in run}
    lemma = {k: run.pop(k) for k in ("sigma_l", "sigma_g", "phi") if k in run}
    hp, eta, w = run, rq.get("eta", 1.0), rq.get("w", 0.0)
    if theta is None:
        theta = theta_lemma_c1(lemma["sigma_l"], lemma["sigma_g"], lemma["phi"])
    form = form or FORMS[algorithm][0]
    theta_arr = np.broadcast_to(np.asarray(theta, float), (T,))
    a, b, cond = round_coeffs(algorithm, form, K, eta_l * lr_decay ** np.arange(T), theta_arr, **rq, **hp)
    out = {"bound_global": iterate(a, b), "conditions": cond, "derived": {}, "closed_form": None}
    if lr_decay == 1 and np.ndim(theta) == 0:
        out["closed_form"] = closed_form(algorithm, form, T, K, eta_l, float(theta), eta, w=w, **hp)
    if algorithm == "fedsagd":
        v_sum = rq.get("v_sum")
        out["derived"] = _fedsagd_derived(hp, eta_l, K, w, form, float(theta_arr[0]),
                                          None if v_sum is None else float(np.max(v_sum)) / 2)
    out["bound_local"] = local_bound(algorithm, K, eta_l, float(theta_arr[0]), "paper", **hp)[0]
    out["bound_local_l1"] = local_bound(algorithm, K, eta_l, float(theta_arr[0]), "l1", **hp)[0]
    return out


def _fedsagd_derived(hp: dict, eta_l: float, K: int, w: float, form: str, theta: float, v_max) -> dict:
    """:func:`fedsagd_derived` of a run's hyperparameters (``theorem_wd``: mu plus the engine weight decay)."""
    param = RoundInputs("fedsagd", form, K, eta_l, theta, 1.0, w, None, None, hp).need
    mu = param("mu") + (w if form == "theorem_wd" else 0.0)
    return fedsagd_derived(eta_l, K, local_beta(hp), param("lam"), mu, theta, form, v_max)


# ----------------------------------------------------------------------------------------------- registration

def _thetas(setting: Setting) -> list:
    out = [("", setting.const("theta_max"))]
    tt = setting.measured.get("theta_t")
    if tt is not None:
        tt = np.asarray(tt, float)[1:setting.T + 1]
        if len(tt) == setting.T and np.all(np.isfinite(tt)):
            out.append((".theta_t", tt))
    return out


def _measured_state(setting: Setting, form: str):
    """``(run quantities, placeholder, notes)`` of one form: the measured state sum the rigorous form reads
    (``{}`` for the others), a NaN Bound when it is missing and reported as such, or ``None`` run quantities
    when the form is skipped (FedDyn: named in the paper form's note instead)."""
    algo, T = setting.algo, setting.T
    name = TABLE[algo].measured_state
    key = f"state_norm_sum/{name}"
    arr = setting.measured.get(key) if name else None
    if form == "rigorous":
        if arr is None and algo == "feddyn":
            return None, None, []
        if arr is None:
            nan = np.full(T + 1, np.nan)
            return None, Bound(f"fedsagd:{algo}.rigorous", algo, "disc", "rigorous", "FedSAGD Table 1, rigorous sums", nan,
                               conditions={f"measured['{key}'] available": False}), []
        return {"v_sum" if name == "v" else "h_sum": np.asarray(arr, float)[:T]}, None, []
    if algo == "feddyn" and form == "paper" and arr is None:
        return {}, None, [f"no measured '{key}' (client h_i norms): rigorous form not reported; the paper form "
                          "assumes ||h_i|| <= Theta, but FedDyn's h_i is not a gradient"]
    return {}, None, []


def _form_bound(setting: Setting, form: str, run: dict, suffix: str, theta, notes: list) -> Bound:
    """One global form of the run's algorithm with one Theta (``theta_max``, or per round)."""
    algo, T, K, eta, hp = setting.algo, setting.T, setting.K, float(setting.global_lr), setting.hp
    lr, w = setting.round_lrs(), float(setting.weight_decay)
    a, b, cond = round_coeffs(algo, form, K, lr, theta, eta, w=w, **run, **hp)
    if TABLE[algo].run_conditions is not None:
        cond.update(TABLE[algo].run_conditions(setting, form))
    const = np.allclose(lr, lr[0]) and np.ndim(theta) == 0
    closed = closed_form(algo, form, T, K, float(lr[0]), theta, eta, w=w, **hp) if const else None
    derived = {"a": a, "b": b}
    if algo == "fedsagd":
        vmax = float(np.max(run["v_sum"])) / 2 if form == "rigorous" else None
        derived.update(_fedsagd_derived(hp, float(lr[0]), K, w, form, float(np.max(theta)), vmax))
    src = "FedSAGD Table 1, rigorous sums" if form == "rigorous" else SRC
    return Bound(f"fedsagd:{algo}.{form}{suffix}", algo, "disc", form, src, iterate(a, b), closed_form=closed,
                 conditions=cond, derived=derived, note="; ".join(notes + (["per-round Theta_t"] if suffix else [])))


@register(*TABLE, name="fedsagd.global")
def global_bounds(setting: Setting) -> list:
    """Every Table-1 form of the run's algorithm, with Theta_max (and per-round Theta_t when measured)."""
    out = []
    for form in TABLE[setting.algo].forms:
        if form in ("wd", "theorem_wd") and not setting.weight_decay:
            continue
        run, placeholder, notes = _measured_state(setting, form)
        if placeholder is not None:
            out.append(placeholder)
        if run is None:
            continue
        out.extend(_form_bound(setting, form, run, suffix, theta, notes) for suffix, theta in _thetas(setting))
    return out
