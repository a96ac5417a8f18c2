"""DP => stability: an (epsilon, delta)-DP algorithm whose losses lie in [0, 1] has
|E[R(A(S)) - R_S(A(S))]| <= e^epsilon - 1 + delta (Wang, Lei & Fienberg, JMLR 2016, Lemma 12: DP implies on-average
replace-one stability, hence the generalisation gap bound).

Registered for every DP run (``DP_KEY``), whatever its algorithm: epsilon is the accountant's
(``stabkit.privacy.accountant``) for the run's schedule after t rounds, at the delta of its ``privacy.json``. The
bound concerns the expected gap (a difference of expectations over the algorithm's randomness); ``stabkit bounds``
compares it with the measured mean |test - train loss| over pairs, and ``stabkit privacy`` puts it beside the
mean loss difference of the pair's two runs.
"""
from __future__ import annotations

import dataclasses
import math

from stabkit.analysis.bounds.base import DP_KEY, Bound, at_horizons, register
from stabkit.privacy.accountant import Schedule, epsilons


def dp_gap_bound(epsilon: float, delta: float) -> float:
    """e^epsilon - 1 + delta (infinite without noise)."""
    return math.expm1(epsilon) + delta if math.isfinite(epsilon) else math.inf


@register(DP_KEY, name="dp.stability")
def dp_stability(setting) -> Bound:
    schedule = Schedule.from_dict(setting.privacy["schedule"])
    delta = float(setting.privacy["delta"])

    def at(t: int) -> float:
        return dp_gap_bound(epsilons(dataclasses.replace(schedule, rounds=t), delta)["epsilon"], delta)

    U = setting.constants.get("U")
    conditions = {"losses in [0, 1] (max per-sample loss U <= 1)": U is not None and float(U) <= 1.0}
    return Bound("dp.stability", setting.algo, "gen_gap", "theorem", "Wang, Lei & Fienberg 2016, Lemma 12",
                 at_horizons(setting.T, at, first=0.0), conditions=conditions,
                 derived={"epsilon_T": epsilons(dataclasses.replace(schedule, rounds=setting.T), delta)["epsilon"],
                          "delta": delta},
                 note="e^eps - 1 + delta, eps the accountant's after t rounds")
