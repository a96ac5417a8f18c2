"""FedSAGD paper: one table entry per Table-1 algorithm (and FedAvgM), everything its bounds differ in.

An :class:`Entry` names the algorithm's global forms (the first is the default), its per-round coefficient
function (:mod:`~stabkit.analysis.bounds.fedsagd_rounds`), its special closed form, its local per-step
function (:mod:`~stabkit.analysis.bounds.fedsagd_steps`), whether engine weight decay only contracts its local
steps, the hyperparameter that is its prox weight lambda, which forms assume the global lr eta = 1 and whether
its ``corrected`` form is the global-lr extension. Adding an algorithm to the FedSAGD-paper bounds is
adding a row.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from stabkit.analysis.bounds import fedsagd_rounds as rounds
from stabkit.analysis.bounds import fedsagd_steps as steps
from stabkit.analysis.bounds.base import Setting


@dataclass(frozen=True)
class Entry:
    """Everything the FedSAGD-paper bounds of one algorithm differ in."""

    forms: tuple  # Bound.form names of the global bound; the first is the default
    coeffs: Callable  # RoundInputs -> (a, b, conditions) of D_{t+1} <= a D_t + b
    local: Callable  # StepInputs -> (a, b, closed, conditions) of the local bound
    wd_contracts: bool  # engine weight decay only adds a contraction (1 - eta_l w) to the local steps
    prox: Optional[str] = None  # the hyperparameter that is a prox weight lambda (enters the wd condition)
    eta_extension: bool = False  # "corrected" is the global-lr extension a -> |1 - eta| + eta a, b -> eta b
    eta_one: tuple = ()  # forms stated for global lr eta = 1 (a condition then says whether it is)
    closed: Optional[Callable] = None  # (RoundInputs, t) -> closed form, or None for the generic geometric one
    measured_state: Optional[str] = None  # the rigorous form reads measured 'state_norm_sum/<name>'
    run_conditions: Optional[Callable] = None  # (setting, form) -> conditions on the implementation variant
    own_wd_forms: tuple = ()  # forms that model the engine weight decay themselves (no wd condition)


def _fedlnag_variant(setting: Setting, form: str) -> dict:
    param = setting.param
    return {"momentum_form = damped_lookahead (the analysed form)": param("momentum_form") == "damped_lookahead",
            "momentum_sync = reset (the analysed form, m_0 = 0 each round)": param("momentum_sync") == "reset"}


def _feddyn_variant(setting: Setting, form: str) -> dict:
    return {"server = analysis (the paper ignores the h-correction)": setting.param("server") == "analysis"}


def _fedsagd_v_norm(setting: Setting, form: str) -> dict:
    """The proof's ||v|| <= Theta, checked on the measured server state where the run logged it."""
    v = setting.measured.get("state_norm_sum/v")
    if form not in ("table1", "theorem", "corrected", "theorem_wd") or v is None:
        return {}
    theta = setting.const("theta_max")
    return {"measured ||v_t|| + ||v'_t|| <= 2 Theta (the proof's ||v|| <= Theta)":
            bool(np.nanmax(np.asarray(v, float)[:setting.T]) <= 2 * theta)}


TABLE = {
    "fedavg": Entry(("paper", "corrected", "wd"), rounds.fedavg, steps.linear(2.0, 2.0), True, None, True,
                    ("paper", "wd"), rounds.fedavg_closed, own_wd_forms=("wd",)),
    "fedprox": Entry(("paper", "corrected"), rounds.prox(2.0), steps.prox(2.0), True, "lam", True, ("paper",)),
    "scaffold": Entry(("paper", "corrected"), rounds.linear(6), steps.linear(6.0, 4.0), False, None, True,
                      ("paper",)),
    "feddyn": Entry(("paper", "corrected", "rigorous"), rounds.prox(4.0), steps.prox(4.0), True, "lam", True,
                    ("paper", "rigorous"), measured_state="h_i", run_conditions=_feddyn_variant),
    "fedlnag": Entry(("paper", "tight", "corrected"), rounds.fedlnag, steps.fedlnag, False, None, True,
                     ("paper", "tight"), run_conditions=_fedlnag_variant),
    "fedadam": Entry(("paper", "eta"), rounds.fedadam, steps.linear(2.0, 2.0), False),
    "fedcm": Entry(("paper", "corrected"), rounds.fedcm, steps.linear_in(steps.fedcm_c), False),
    "mimelite": Entry(("paper", "corrected"), rounds.linear(2), steps.linear_in(steps.mimelite_c), False, None,
                      True, ("paper",)),
    "fedacg": Entry(("paper", "round", "round_lam", "corrected"), rounds.fedacg, steps.linear(2.0, 2.0), False,
                    None, True, ("paper", "round", "round_lam"), rounds.fedacg_closed),
    "fedanag": Entry(("paper", "round", "corrected"), rounds.fedanag, steps.linear_in(steps.fedanag_c), False,
                     None, True, ("paper", "round"), rounds.fedanag_closed),
    "fedavgm": Entry(("derived",), rounds.fedavgm, steps.linear(2.0, 2.0), False, closed=rounds.fedavgm_closed),
    "fedsagd": Entry(("table1", "theorem", "rigorous", "corrected", "theorem_wd"), rounds.fedsagd, steps.fedsagd,
                     True, "lam", True, ("table1", "theorem", "rigorous", "theorem_wd"), rounds.fedsagd_closed,
                     measured_state="v", run_conditions=_fedsagd_v_norm),
}


def entry(algo: str, what: str = "global") -> Entry:
    """The table row of ``algo`` (ValueError naming it when the FedSAGD paper has no bound for it)."""
    if algo not in TABLE:
        raise ValueError(f"no FedSAGD-paper {what} bound for {algo!r}")
    return TABLE[algo]


def wd_condition(algo: str, w: float, eta_l_max: float, lam: float = 0.0) -> dict:
    """The weight-decay validity condition of a Table-1 bound (Table 1 ignores weight decay):
    where weight decay only contracts, ``eta_l (lambda + w) <= 1`` with lambda the algorithm's prox weight."""
    if not w:
        return {}
    if TABLE[algo].wd_contracts:
        return {"engine weight decay only contracts: eta_l (lambda + w) <= 1": eta_l_max * (lam + w) <= 1}
    return {"no engine weight decay (enters a state/update norm the analysis bounds by Theta)": False}


def prox_weight(algo: str, hp: dict, need: Callable) -> float:
    """The algorithm's prox weight lambda (0 where it has none; FedACG's lam is a server momentum)."""
    name = TABLE[algo].prox
    return need(name) if name else 0
