"""The audit's lower bound on epsilon from trials of a mechanism on two neighbouring inputs (Jagielski et al. 2020).

Each trial gives one output on D and one on D' (a pair of trajectories with independent noise), reduced to a
score (``stabkit.privacy.auditrun``). A threshold test says "D'" when the score is on the D' side of a threshold.
The trials are split in two halves: the threshold and its side are chosen on the first (the one giving the
largest bound there), and the second, unseen, half gives the false positive rate FPR (D's scores called D') and
false negative rate FNR with one-sided Clopper-Pearson 95% upper bounds (each fails with probability at most 5%,
so both hold with probability at least 90%). The threshold is chosen by the same bound at the stricter
``SELECTION_CONFIDENCE``: the extreme thresholds where the selection half happens to see no error are what a
lenient choice overfits, and they do not hold up on the evaluation half. (epsilon, delta)-DP forces 1 - delta - FNR <= e^epsilon FPR and, the relation being
symmetric, 1 - delta - FPR <= e^epsilon FNR, so

    epsilon_lower = max( log((1 - delta - FNR_hi) / FPR_hi), log((1 - delta - FPR_hi) / FNR_hi), 0 )

holds with probability at least 90%. Too few trials cannot give a bound above 0 even with no errors at all:
:func:`minimum_trials` says how many are needed.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from stabkit.errors import ConfigError

CONFIDENCE = 0.95
SELECTION_CONFIDENCE = 0.999
CANDIDATES = 400  # thresholds tried on the selection half (quantiles of its scores)


def upper_bound(errors, n: int, confidence: float = CONFIDENCE):
    """The one-sided Clopper-Pearson ``confidence`` upper bound of a rate seen ``errors`` / ``n`` times (1 where
    every trial erred); ``errors`` may be an array."""
    k = np.minimum(np.asarray(errors, dtype=float), n - 1)
    return np.where(np.asarray(errors) >= n, 1.0, stats.beta.ppf(confidence, k + 1, n - k))


def bound(fpr_hi, fnr_hi, delta: float):
    """The larger of the two directions' ``log((1 - delta - FNR) / FPR)`` (-inf where it is not positive)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        one = np.log(np.maximum(1 - delta - fnr_hi, 0) / fpr_hi)
        other = np.log(np.maximum(1 - delta - fpr_hi, 0) / fnr_hi)
    return np.maximum(one, other)


def minimum_trials(delta: float) -> int:
    """The fewest trials whose evaluation half, with no error at all, bounds epsilon above 0."""
    n = 1
    while not bound(upper_bound(0, n), upper_bound(0, n), delta) > 0:
        n += 1
    return 2 * n


def check_trials(trials: int, delta: float) -> None:
    """One ConfigError line when ``trials`` cannot certify any epsilon above 0."""
    need = minimum_trials(delta)
    if not isinstance(trials, int) or trials < need:
        raise ConfigError(f"invalid trials={trials!r}: at least {need} are needed for any bound above 0 at "
                          f"delta={delta:g} (about 10^4 certify epsilon near 1 on a Gaussian mechanism)")


def _rates(scores_d, scores_d2, thresholds, side: int):
    """Error counts at each threshold for the test "D' when side * score >= side * threshold"."""
    a = np.sort(side * np.asarray(scores_d, dtype=float))
    b = np.sort(side * np.asarray(scores_d2, dtype=float))
    t = side * np.asarray(thresholds, dtype=float)
    false_pos = len(a) - np.searchsorted(a, t, side="left")
    false_neg = np.searchsorted(b, t, side="left")
    return false_pos, false_neg


def epsilon_lower(scores_d, scores_d2, delta: float) -> dict:
    """The audit of trials with scores ``scores_d`` (outputs on D) and ``scores_d2`` (on D'), trial i giving
    entry i of each: the threshold chosen on the first half, the bound from the second."""
    n = len(scores_d)
    check_trials(n, delta)
    half = n // 2
    pick = np.concatenate([scores_d[:half], scores_d2[:half]])
    thresholds = np.unique(np.quantile(pick, np.linspace(0, 1, CANDIDATES)))
    best = (-math.inf, None, None)
    for side in (1, -1):
        fp, fn = _rates(scores_d[:half], scores_d2[:half], thresholds, side)
        values = bound(upper_bound(fp, half, SELECTION_CONFIDENCE), upper_bound(fn, half, SELECTION_CONFIDENCE), delta)
        i = int(np.argmax(values))
        if values[i] > best[0]:
            best = (float(values[i]), float(thresholds[i]), side)
    _, threshold, side = best
    m = n - half
    fp, fn = (int(v[0]) for v in _rates(scores_d[half:], scores_d2[half:], [threshold], side))
    fpr_hi, fnr_hi = float(upper_bound(fp, m)), float(upper_bound(fn, m))
    value = float(bound(fpr_hi, fnr_hi, delta))
    point = float(bound(fp / m, fn / m, delta))  # the same formula on the rates seen (no confidence): inf at 0 errors
    return {"epsilon_lower": max(value, 0.0), "epsilon_point": max(point, 0.0), "threshold": threshold,
            "side": "above" if side > 0 else "below",
            "fpr": fp / m, "fnr": fn / m, "fpr_upper": fpr_hi, "fnr_upper": fnr_hi, "trials": n,
            "evaluated": m, "delta": delta, "confidence": CONFIDENCE}


__all__ = ["CONFIDENCE", "bound", "check_trials", "epsilon_lower", "minimum_trials", "upper_bound"]
