"""FedSAGD paper: global-update stability bounds of Table 1 / App. C as per-round recursions (fedsagd.md §3.1-§3.3, §7).

``D_{t+1} <= a_t D_t + b_t`` with ``D_0 = 0`` and ``D_t = E||x_t - x'_t||``, evaluated with the run's lr
``eta_l(t)`` and ``Theta = constants['theta_max']`` (plus a per-round variant from ``measured['theta_t']``).
Forms (Bound.form):

* ``paper``      Table 1 / §3.2 as printed (the paper assumes global lr eta = 1; flagged when it is not);
* ``corrected``  the §3.2 global-lr extension ``a_eta = |1-eta| + eta a``, ``b_eta = eta b`` (FedCM: the general
  ``c = eta_g/(eta_l K)`` step, valid for eta_l K < 1 too); identical to ``paper`` at eta = 1;
* extra forms: FedLNAG ``tight``; FedAdam ``eta`` (UNCERTAIN-04: the bound times eta); FedACG ``round`` and
  ``round_lam`` (UNCERTAIN-27 readings); FedANAG ``round``; FedAvgM ``derived``; FedDyn ``rigorous`` (measured
  ``state_norm_sum/h_i``); FedAvg ``wd`` (weight-decay control, §3.2 last row, only when the run has weight decay);
  FedSAGD ``table1`` / ``theorem`` / ``rigorous`` (measured ``state_norm_sum/v``, §3.6 item 2) / ``corrected``
  (theorem + eta extension) / ``theorem_wd`` (mu + engine weight decay).

Weight decay (the engine adds ``w y`` to every algorithm's gradient): Table 1 ignores it (§3.6 item 3, erratum 10).
We keep the Table-1 baselines as printed and flag validity instead: for FedAvg/FedProx/FedDyn/FedSAGD the wd term
only adds a contraction, so the bounds stay valid (condition ``eta_l (lambda + w) <= 1``); for the others it
enters a state or update norm the proof bounds by Theta, so the condition "no weight decay" is False. The tighter
wd-aware forms are FedAvg ``wd`` and FedSAGD ``theorem_wd``.

Plain-number entry points: :func:`round_coeffs`, :func:`closed_form`, :func:`evaluate` (§7 contract),
:func:`fedsagd_constants`, :func:`crossover_vs_fedavg`, :func:`theta_lemma_c1`.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, hp_value, iterate, register
from stabkit.analysis.bounds.fedsagd_local import LOCAL_ALGOS, PROX_LAM, local_beta, local_bound, wd_condition

SRC = "fedsagd.md §3.2"
ETA_EXT = ("fedavg", "fedprox", "scaffold", "feddyn", "fedlnag", "mimelite", "fedacg", "fedanag", "fedsagd")
FORMS = {"fedavg": ("paper", "corrected", "wd"), "fedprox": ("paper", "corrected"),
         "scaffold": ("paper", "corrected"), "feddyn": ("paper", "corrected", "rigorous"),
         "fedlnag": ("paper", "tight", "corrected"), "fedadam": ("paper", "eta"), "fedcm": ("paper", "corrected"),
         "mimelite": ("paper", "corrected"), "fedacg": ("paper", "round", "round_lam", "corrected"),
         "fedanag": ("paper", "round", "corrected"), "fedavgm": ("derived",),
         "fedsagd": ("table1", "theorem", "rigorous", "corrected", "theorem_wd")}


def theta_lemma_c1(sigma_l: float, sigma_g: float, phi: float) -> float:
    """Lemma C.1: ``Theta = sqrt(sigma_l^2 + 2 sigma_g^2 + 2 Phi)`` (Phi is a squared gradient norm), §1.5."""
    return math.sqrt(sigma_l ** 2 + 2 * sigma_g ** 2 + 2 * phi)


def fedsagd_constants(eta_l, K: int, lam: float, mu: float) -> dict:
    """§3.1: ``q = (1 - eta_l(lam+mu))^K``, ``zeta = (1-q)/(lam+mu)``, ``Gamma = mu zeta`` (arrays allowed)."""
    eta_l = np.asarray(eta_l, float)
    rate = lam + mu
    q = (1.0 - eta_l * rate) ** K
    zeta = (1.0 - q) / rate if rate > 0 else eta_l * K
    return {"q": q, "zeta": zeta, "Gamma": mu * zeta}


def _prox_sum(lam: float, eta_l, K: int):
    """``(1 - (1 - lam eta_l)^K) / lam`` (limit eta_l K at lam = 0)."""
    return (1.0 - (1.0 - lam * eta_l) ** K) / lam if lam > 0 else eta_l * K


def _momentum(coef: float, inc: np.ndarray) -> np.ndarray:
    """``M_0 = 0, M_{t+1} = coef M_t + inc_t``; returns M_0..M_T."""
    return iterate(coef, inc)


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
    need = lambda name: hp_value(hp, algo, name)  # noqa: E731
    lr, theta = np.broadcast_arrays(np.atleast_1d(np.asarray(lr, float)), np.atleast_1d(np.asarray(theta, float)))
    T = len(lr)
    cond = {}
    eK = lr * K
    a = np.ones(T)
    paper_eta = form in ("paper", "tight", "round", "round_lam", "table1", "theorem", "rigorous", "theorem_wd",
                         "wd")
    if algo in ("fedavg", "mimelite") and form in ("paper", "corrected"):
        b = 2 * eK * theta
    elif algo == "fedavg" and form == "wd":
        q = (1 - lr * w) ** K
        a, b = q, 2 * theta * _prox_sum(w, lr, K)
        cond["weight decay w > 0"] = w > 0
        cond["eta_l w <= 1"] = bool(np.all(lr * w <= 1))
    elif algo in ("fedprox", "feddyn"):
        c, lam = (2.0 if algo == "fedprox" else 4.0), need("lam")
        if form == "rigorous":
            if h_sum is None:
                raise ValueError("FedDyn rigorous form needs h_sum (measured ||h_i|| + ||h'_j||)")
            b = (2 * theta + np.asarray(h_sum, float)[:T]) * _prox_sum(lam, lr, K)
        else:
            b = c * theta * _prox_sum(lam, lr, K)
        cond["lambda > 0"] = lam > 0
        cond["eta_l lambda <= 1"] = bool(np.all(lr * lam <= 1))
    elif algo == "scaffold":
        b = 6 * eK * theta
    elif algo == "fedlnag":
        beta = need("beta")
        b = 2 * eK * theta if form != "tight" else 2 * lr * theta * (K - beta * (1 - beta ** K) / (1 - beta))
        cond["beta < 1"] = beta < 1
    elif algo == "fedadam":
        b = (2 / need("tau")) * eK * theta * (eta if form == "eta" else 1.0)
        if form == "paper":
            cond["eta <= 1 (the printed bound drops the global lr, UNCERTAIN-04)"] = eta <= 1
    elif algo == "fedcm":
        gradient_units = need("server") == "gradient"
        if form == "paper":
            b = np.full(T, 2.0) * theta
            cond["eta_l K >= 1 (the paper's coefficient 1 - 1/(eta_l K) >= 0)"] = bool(np.all(eK >= 1))
            cond["server in gradient units (the analysed parametrisation, UNCERTAIN-06)"] = gradient_units
        else:
            c = eta / eK if gradient_units else np.full(T, float(eta))
            a, b = np.abs(1 - c) + c, 2 * c * eK * theta
    elif algo == "fedacg":
        lam = need("lam")
        cond["lambda < 1"] = lam < 1
        cond["eta_l beta_acg <= 1 (the analysis omits the local penalty)"] = bool(np.all(lr * need("beta_acg") <= 1))
        if form in ("round", "round_lam"):
            M = _momentum(lam, eK * theta)[:T]  # ||m_t|| <= eta_l K Theta (1 - lam^t)/(1 - lam)
            b = 2 * eK * theta + 2 * (lam if form == "round_lam" else 1.0) * M
        else:
            b = (4 - 2 * lam) / (1 - lam) * eK * theta
    elif algo == "fedanag":
        beta = need("beta")
        cond["beta < 1"] = beta < 1
        if form == "round":
            V = _momentum(beta, theta)[:T]  # ||v_t|| <= Theta (1 - beta^t)/(1 - beta)
            b = 2 * eK * ((1 + beta) * theta + beta ** 2 * V)
        else:
            b = 2 / (1 - beta) * eK * theta
    elif algo == "fedavgm":
        M = _momentum(need("beta"), eK * theta)[1:]  # ||m_{t+1}||
        b = 2 * eta * M
    elif algo == "fedsagd":
        beta, lam = local_beta(hp), need("lam")
        mu_eff = need("mu") + (w if form == "theorem_wd" else 0.0)
        k = fedsagd_constants(lr, K, lam, mu_eff)
        a = 1 - k["Gamma"]
        if form == "table1":
            b = (2 + 2 * beta) * theta / (lam + mu_eff) if lam + mu_eff > 0 else np.full(T, np.inf)
        elif form == "rigorous":
            if v_sum is None:
                raise ValueError("FedSAGD rigorous form needs v_sum (measured ||v_t|| + ||v'_t||)")
            b = k["zeta"] * (2 * theta + beta * np.asarray(v_sum, float)[:T])
        else:
            b = k["zeta"] * (2 + 2 * beta) * theta
        cond["mu > 0 (else Gamma = 0: no saturation)"] = mu_eff > 0
        cond["lambda >= 0"] = lam >= 0
        cond["0 < eta_l (lambda + mu) <= 1"] = bool(np.all((lr * (lam + mu_eff) > 0) & (lr * (lam + mu_eff) <= 1)))
        cond["0 < Gamma < 1"] = bool(np.all((k["Gamma"] > 0) & (k["Gamma"] < 1)))
        if form == "theorem_wd":
            cond["engine weight decay w > 0"] = w > 0
    else:
        raise ValueError(f"no FedSAGD-paper global bound {algo}.{form}")
    a, b = np.broadcast_to(np.asarray(a, float), (T,)).copy(), np.broadcast_to(np.asarray(b, float), (T,)).copy()
    if form == "corrected" and algo in ETA_EXT:
        a, b = abs(1 - eta) + eta * a, eta * b
    elif paper_eta and algo in ETA_EXT or (algo == "fedcm" and form == "paper"):
        cond["global lr eta = 1 (the paper's stability analysis)"] = eta == 1
    if algo != "fedavg" or form != "wd":
        cond.update(wd_condition(algo, w, float(np.max(lr)), need("lam") if algo in PROX_LAM else 0))
    return a, b, cond


def closed_form(algo: str, form: str, T: int, K: int, eta_l: float, theta: float, eta: float = 1.0, w: float = 0.0,
                **hp):
    """Closed form ``D_t``, t = 0..T, for a constant lr and scalar Theta (None where the spec has none);
    ``w`` and ``hp`` as in :func:`round_coeffs`."""
    need = lambda name: hp_value(hp, algo, name)  # noqa: E731
    t = np.arange(T + 1, dtype=float)
    eK = eta_l * K
    if form == "rigorous":
        return None
    if algo == "fedavg" and form == "wd":
        return 2 * theta / w * (1 - (1 - eta_l * w) ** (K * t))
    if algo == "fedsagd" and form in ("theorem", "theorem_wd", "table1"):
        beta, lam, mu = local_beta(hp), need("lam"), need("mu") + (w if form == "theorem_wd" else 0.0)
        if mu > 0:
            k = fedsagd_constants(eta_l, K, lam, mu)
            scale = 1.0 if form != "table1" else 1.0 / ((lam + mu) * float(k["zeta"]))
            return scale * (2 + 2 * beta) * theta * (1 - (1 - k["Gamma"]) ** t) / mu
    if algo == "fedacg" and form in ("round", "round_lam"):
        lam = need("lam")
        f = lam if form == "round_lam" else 1.0
        return 2 * eK * theta * (t + f * (t - (1 - lam ** t) / (1 - lam)) / (1 - lam))
    if algo == "fedanag" and form == "round":
        beta = need("beta")
        return 2 * eK * theta * ((1 + beta) * t + beta ** 2 * (t - (1 - beta ** t) / (1 - beta)) / (1 - beta))
    if algo == "fedavgm":
        beta = need("beta")
        return 2 * eta * eK * theta / (1 - beta) * (t - beta * (1 - beta ** t) / (1 - beta))
    a, b, _ = round_coeffs(algo, form, K, eta_l, theta, eta, w=w, **hp)
    a, b = float(a[0]), float(b[0])
    return b * t if a == 1 else b * (1 - a ** t) / (1 - a)


def crossover_vs_fedavg(fsagd, favg) -> Optional[int]:
    """Smallest T >= 1 with ``fsagd(T) < favg(T)``; both callables concave-vs-linear (single crossing), §3.5."""
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
    """Gamma, zeta, q, 1/Gamma, asymptote and the crossover T against FedAvg (constant lr, §3.3, §3.5)."""
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


def evaluate(algorithm: str, K: int, T: int, eta_l: float, eta: float = 1.0, lr_decay: float = 1.0,
             theta=None, sigma_l=None, sigma_g=None, phi=None, form: Optional[str] = None, w: float = 0.0,
             v_sum=None, h_sum=None, **hp) -> dict:
    """§7 contract from explicit numbers: ``bound_global`` (t = 0..T), ``closed_form``, ``bound_local`` and
    ``bound_local_l1`` (k = 0..K, round 0), ``conditions``, ``derived``.

    Theta: scalar, per-round array (length T), or via Lemma C.1 from ``(sigma_l, sigma_g, phi)``. ``form``
    defaults to the algorithm's first form; ``w``, ``v_sum``, ``h_sum`` and the hyperparameters ``hp`` are those
    of :func:`round_coeffs` (the local bounds read theirs, :func:`local_bound`).
    """
    if theta is None:
        theta = theta_lemma_c1(sigma_l, sigma_g, phi)
    form = form or FORMS[algorithm][0]
    lr = eta_l * lr_decay ** np.arange(T)
    theta_arr = np.broadcast_to(np.asarray(theta, float), (T,))
    a, b, cond = round_coeffs(algorithm, form, K, lr, theta_arr, eta, w=w, v_sum=v_sum, h_sum=h_sum, **hp)
    out = {"bound_global": iterate(a, b), "conditions": cond, "derived": {}, "closed_form": None}
    if lr_decay == 1 and np.ndim(theta) == 0:
        out["closed_form"] = closed_form(algorithm, form, T, K, eta_l, float(theta), eta, w=w, **hp)
    if algorithm == "fedsagd":
        mu = hp_value(hp, algorithm, "mu") + (w if form == "theorem_wd" else 0.0)
        vmax = None if v_sum is None else float(np.max(v_sum)) / 2
        out["derived"] = fedsagd_derived(eta_l, K, local_beta(hp), hp_value(hp, algorithm, "lam"), mu,
                                         float(theta_arr[0]), form, vmax)
    out["bound_local"] = local_bound(algorithm, K, eta_l, float(theta_arr[0]), "paper", **hp)[0]
    out["bound_local_l1"] = local_bound(algorithm, K, eta_l, float(theta_arr[0]), "l1", **hp)[0]
    return out


# ----------------------------------------------------------------------------------------------- registration

def _algo_conditions(setting: Setting, form: str) -> dict:
    """Conditions on the implementation variant the analysis covers."""
    algo, param = setting.algo, setting.param
    if algo == "fedlnag":
        return {"momentum_form = damped_lookahead (the analysed form)": param("momentum_form") == "damped_lookahead",
                "momentum_sync = reset (the analysed form, m_0 = 0 each round)": param("momentum_sync") == "reset"}
    if algo == "feddyn":
        return {"server = analysis (the paper ignores the h-correction)": param("server") == "analysis"}
    if algo == "fedsagd" and form in ("table1", "theorem", "corrected", "theorem_wd"):
        v = setting.measured.get("state_norm_sum/v")
        if v is not None:
            theta = setting.const("theta_max")
            return {"measured ||v_t|| + ||v'_t|| <= 2 Theta (the proof's ||v|| <= Theta)":
                    bool(np.nanmax(np.asarray(v, float)[:setting.T]) <= 2 * theta)}
    return {}


def _thetas(setting: Setting) -> list:
    out = [("", setting.const("theta_max"))]
    tt = setting.measured.get("theta_t")
    if tt is not None:
        tt = np.asarray(tt, float)[1:setting.T + 1]
        if len(tt) == setting.T and np.all(np.isfinite(tt)):
            out.append((".theta_t", tt))
    return out


@register(*LOCAL_ALGOS, name="fedsagd.global")
def global_bounds(setting: Setting) -> list:
    """Every §3.2 form of the run's algorithm, with Theta_max (and per-round Theta_t when measured)."""
    algo, T, K, eta = setting.algo, setting.T, setting.K, float(setting.global_lr)
    lr = np.asarray(setting.lr, float)[:T]
    hp, w = setting.hp, float(setting.weight_decay)
    meas = setting.measured
    out = []
    for form in FORMS[algo]:
        notes, run = [], {"w": w}
        if form in ("wd", "theorem_wd") and not setting.weight_decay:
            continue
        if form == "rigorous":
            key = "state_norm_sum/v" if algo == "fedsagd" else "state_norm_sum/h_i"
            arr = meas.get(key)
            if arr is None and algo == "feddyn":
                continue  # reported in the paper form's note
            if arr is None:
                nan = np.full(T + 1, np.nan)
                out.append(Bound(f"fedsagd:{algo}.rigorous", algo, "disc", "rigorous", "fedsagd.md §3.6 item 2",
                                 nan, conditions={f"measured['{key}'] available": False}))
                continue
            run["v_sum" if algo == "fedsagd" else "h_sum"] = np.asarray(arr, float)[:T]
        if algo == "feddyn" and form == "paper" and meas.get("state_norm_sum/h_i") is None:
            notes.append("no measured 'state_norm_sum/h_i' (client h_i norms): rigorous form not reported; the "
                         "paper form assumes ||h_i|| <= Theta (§3.6 item 7)")
        for suffix, theta in _thetas(setting):
            a, b, cond = round_coeffs(algo, form, K, lr, theta, eta, **run, **hp)
            cond.update(_algo_conditions(setting, form))
            const = np.allclose(lr, lr[0]) and np.ndim(theta) == 0
            closed = closed_form(algo, form, T, K, float(lr[0]), theta, eta, w=w, **hp) if const else None
            derived = {"a": a, "b": b}
            if algo == "fedsagd":
                vmax = float(np.max(run["v_sum"])) / 2 if form == "rigorous" else None
                mu = setting.param("mu") + (w if form == "theorem_wd" else 0.0)
                derived.update(fedsagd_derived(float(lr[0]), K, local_beta(hp), setting.param("lam"), mu,
                                               float(np.max(theta)), form, vmax))
            src = "fedsagd.md §3.6 item 2" if form == "rigorous" else SRC
            out.append(Bound(f"fedsagd:{algo}.{form}{suffix}", algo, "disc", form, src, iterate(a, b),
                             closed_form=closed, conditions=cond, derived=derived,
                             note="; ".join(notes + (["per-round Theta_t"] if suffix else []))))
    return out
