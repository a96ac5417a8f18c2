"""Libra's measurement statistics on an excess-risk curve (Libra, Definition 1 and Corollary 1): its minimum
T*, the fitting regime at the end of training, and the NNLS fit of the measured proxy by phi1 s_t + phi2 g_t
with t-intervals.

Statistics of measured curves, beside :mod:`stabkit.analysis.fits` (growth laws); the bounds they are applied to
(Corollary 1 on measured s_t, g_t: :func:`stabkit.analysis.bounds.libra.excess_risk_dynamics`) stay in
``analysis/bounds``.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import nnls


def minimum_excess_risk_round(e_t, start: int = 0) -> int:
    """T* = argmin_t e_t (Libra, Definition 1), ignoring NaNs and rounds before ``start`` (first occurrence)."""
    e = np.asarray(e_t, float).copy()
    e[:start] = np.nan
    return int(np.nanargmin(e))


def fitting_regime(e_t, tol: float = 0.05, tail: float = 0.1, start: int = 0) -> str:
    """Fitting regime at the END of training relative to T* = argmin e_t (Libra, Definition 1).

    Libra (its remark on the excess-risk dynamics): the minimum at T* is benign fitting, t < T* is
    under-fitting, t > T* is over-fitting. Operationalised
    with a relative tolerance on the curve's range R = max e - min e (over t >= start):
      * "over-fitting":  the last value lies more than ``tol * R`` above the minimum (e rose again after T*);
      * "under-fitting": not over-fitting, and e is still decreasing at the end: its mean decrease per round over
        the last ``tail`` fraction of rounds (at least 1) exceeds ``tol`` times its mean decrease per round over the
        whole curve, i.e. T* sits at the end of a still-falling curve;
      * "benign":        otherwise (flat minimum at the end: converged, not yet rising).
    A constant curve (R = 0) is "benign".
    """
    e = np.asarray(e_t, float)[start:]
    e = e[np.isfinite(e)]
    R = float(np.max(e) - np.min(e)) if len(e) else 0.0
    if R <= 0:
        return "benign"
    if e[-1] - np.min(e) > tol * R:
        return "over-fitting"
    w = max(1, int(round(tail * (len(e) - 1))))
    overall = (e[0] - e[-1]) / (len(e) - 1)  # mean decrease per round over the whole curve
    if overall > 0 and (e[-1 - w] - e[-1]) / w > tol * overall:
        return "under-fitting"
    return "benign"


def fit_excess_risk(e_t, s_t, g_t, start: int = 0) -> dict:
    """Corollary 1's shape with free constants: fit e_t ~ phi1 s_t + phi2 g_t with phi1, phi2 >= 0
    (scipy.optimize.nnls) over t >= start.

    Returns phi1, phi2, the fitted curve (all t), the residual norm, ``phi1.ci`` / ``phi2.ci`` (95% intervals of
    the unconstrained least-squares coefficients, t distribution) and ``degenerate``: a coefficient sits on its
    bound phi = 0, so the run does not identify that term (phi1 = 0: the fit is a multiple of g_t alone and
    says nothing about stability). Only a non-degenerate fit has a ``T_star`` (argmin of the fitted curve, the
    estimate of Libra's T*); a degenerate one has ``T_star`` None and ``on_bound`` naming the coefficients."""
    e, s, g = (np.asarray(v, float) for v in (e_t, s_t, g_t))
    ok = np.isfinite(e) & np.isfinite(s) & np.isfinite(g)
    ok[:start] = False
    A = np.stack([s[ok], g[ok]], axis=1)
    coef, res = nnls(A, e[ok])
    fitted = coef[0] * s + coef[1] * g
    f = np.where(ok, fitted, np.nan)
    on_bound = [name for name, c in zip(("phi1", "phi2"), coef) if c <= 0.0]
    out = {"phi1": float(coef[0]), "phi2": float(coef[1]), "fitted": fitted, "residual": float(res),
           "degenerate": bool(on_bound), "on_bound": on_bound,
           "T_star": None if on_bound else int(np.nanargmin(f))}
    out.update(_ols_intervals(A, e[ok]))
    return out


def _ols_intervals(A: np.ndarray, y: np.ndarray, level: float = 0.95) -> dict:
    """``{"phi1.ci": (lo, hi), "phi2.ci": (lo, hi)}``: the unconstrained least-squares coefficients' intervals
    (NaN where the rounds do not determine them: fewer than 3 rounds or collinear columns)."""
    from scipy import stats

    n = len(y)
    nan = (float("nan"), float("nan"))
    if n < 3 or np.linalg.matrix_rank(A) < 2:
        return {"phi1.ci": nan, "phi2.ci": nan}
    beta, *_ = np.linalg.lstsq(A, y, rcond=None)
    sigma2 = float(np.sum((y - A @ beta) ** 2)) / (n - 2)
    se = np.sqrt(np.diag(np.linalg.inv(A.T @ A)) * sigma2)
    q = stats.t.ppf(0.5 + level / 2, n - 2)
    return {f"phi{i + 1}.ci": (float(beta[i] - q * se[i]), float(beta[i] + q * se[i])) for i in range(2)}
