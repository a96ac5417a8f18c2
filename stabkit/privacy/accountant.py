"""The accountant's epsilon(delta) of a DP run's schedule, and the same accountants fed measured sensitivities.

**Neighbouring relation.** stabkit's perturbations replace one client's data (``--perturb client``, both client
modes) or one of its samples (``--perturb sample``, which changes one client too); client-level DP therefore
covers every pair stabkit runs. Replacing one client moves the mean of the s clipped deltas by at most 2C/s;
the noise on that mean has standard deviation z C / s, so every round is the Gaussian mechanism with noise
z / 2 times its sensitivity.

**Sampling model.** Each round's cohort is s of the M clients drawn uniformly without replacement
(``stabkit.engine.sampling``), independently across rounds: fixed-size sampling under the replace-one
relation, with M public.

**How the library is told** (Google's ``dp-accounting``, ``NeighboringRelation.REPLACE_ONE``):

* RDP: T rounds of ``SampledWithoutReplacementDpEvent(M, s, GaussianDpEvent(z / 2))`` (Wang, Balle &
  Kasiviswanathan 2019; the library's noise multiplier is the std over the replace-one sensitivity 2C/s;
  with s = M the sampling is the identity), on the orders ``ORDERS``.
* PLD: T rounds of ``GaussianDpEvent(z)`` (composed as the one Gaussian they are, z_eff = z / sqrt(T)): under REPLACE_ONE the library takes the replace-one sensitivity
  as twice the add/remove one (C/s), which is exactly 2C/s. The library's PLD accountant has no fixed-size
  sampling without replacement, so it is told no sampling: a valid bound (each round's pair of output
  distributions is a mixture of pairs that are identical or this Gaussian pair, and the hockey-stick divergence
  is jointly convex), exact with full participation and looser than RDP's at small s/M and many rounds.

``epsilon`` is the smaller of the two (with full participation, PLD: the exact Gaussian composition).

**Measured sensitivities** (per-instance DP, Wang 2017; individual accounting, Feldman & Zrnic 2021): the same
events with round t's sensitivity ``dp_sensitivity_t`` in place of 2C/s, i.e. noise multipliers divided by
r_t = dp_sensitivity_t / (2C/s). A round whose differing client was not sampled (NaN) takes the worst case
r_t = 1 (its sensitivity, had the client been sampled, was not measured) inside the same sampled event; a round
with r_t = 0 adds nothing. r_t is rounded up to the grid 1.05^k (at most 5% more sensitivity, so the result stays
an upper bound of the exact per-instance composition) so that rounds of similar sensitivity are composed as one
group. Every round's event is then dominated by the accountant's, so the measured epsilon never exceeds it.
The worst case holds for every instance, so a measured epsilon above the accountant's (one accountant's
measured value can exceed another's worst case, and the library's PLD overflows to infinity at some z_eff << 1)
is reported as the accountant's. It is an estimate along the realised trajectory (the sensitivities depend on the noise already drawn), not a
guarantee chosen before the run.
"""
from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from stabkit.errors import require
from stabkit.extras import require_extra

# RDP orders: the library's default list (up to 1024) costs ~10x more per sampled event (150 ms), mostly for
# orders above 64, which only matter for epsilons well below 1
ORDERS = (1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0, 24.0, 32.0, 48.0, 64.0)
# The PLD's discretisation at z_eff >= 1 (the library's default is 1e-4): pessimistic, so epsilon stays an upper
# bound; against 1e-4 it is at most 2e-4 higher (relative, z_eff 0.05-3) and 5-15x faster, which a run's
# per-pair measured epsilons (one PLD each) need
PLD_STEP = 1e-3
GRID = 1.05  # measured sensitivity ratios are rounded up to powers of this
# The library's RDP of a sampled Gaussian loses all precision for noise multipliers far above this (a log of
# 1 - e^{-x} with x below machine epsilon: "math domain error"); a round measured with a smaller sensitivity
# (one differing sample among thousands) is accounted at this noise instead, which only raises its epsilon.
SIGMA_CAP = 1e4
RELATION = "replace one client: the mean of the s clipped deltas moves by at most 2C/s"
SAMPLING = "fixed-size cohorts: s of the M clients uniformly without replacement, independently each round"


@dataclass(frozen=True)
class Schedule:
    """What the accountant needs of a DP run: T rounds, M clients, s per round, clip C, noise multiplier z."""

    rounds: int
    clients: int
    sampled: int
    clip: float
    noise_multiplier: float

    @property
    def sensitivity(self) -> float:
        """The worst-case replace-one sensitivity 2C/s of the mean upload."""
        return 2 * self.clip / self.sampled

    @property
    def noise_std(self) -> float:
        """The noise's standard deviation z C / s on the mean upload."""
        return self.noise_multiplier * self.clip / self.sampled

    def to_dict(self) -> dict:
        return {**asdict(self), "sensitivity": self.sensitivity, "noise_std": self.noise_std,
                "relation": RELATION, "sampling": SAMPLING}

    @classmethod
    def from_dict(cls, d: dict) -> "Schedule":
        return cls(**{k: d[k] for k in ("rounds", "clients", "sampled", "clip", "noise_multiplier")})


def check_delta(delta) -> float:
    """``delta`` if it is a number in (0, 1), else one ConfigError line."""
    ok = isinstance(delta, (int, float)) and not isinstance(delta, bool) and 0 < delta < 1
    require(ok, "delta", delta, "a number in (0, 1), e.g. 1e-5")
    return float(delta)


def epsilons(schedule: Schedule, delta: float, sensitivities: Optional[np.ndarray] = None) -> dict:
    """``{"rdp", "pld", "epsilon", "accountant"}`` at ``delta``: the accountants' epsilons of the schedule, or
    with ``sensitivities`` ``[T]`` (NaN: not measured) in place of the worst case. Infinite without noise."""
    delta = check_delta(delta)
    worst = dict(_worst_case(schedule, delta))  # the worst case depends on the schedule alone: cached
    if sensitivities is None:
        return worst
    measured = _epsilons(schedule, delta, sensitivities)
    if measured["epsilon"] > worst["epsilon"]:  # e.g. RDP's measured value above PLD's worst case
        measured.update(epsilon=worst["epsilon"], accountant=f"{worst['accountant']} (the worst case)")
    return measured


@functools.lru_cache(maxsize=4096)
def _worst_case(schedule: Schedule, delta: float) -> tuple:
    """The accountants' epsilons of ``schedule`` at ``delta``, cached: the DP bound asks for every horizon
    t = 1..T of every DP job, and an atlas's jobs share a few schedules."""
    return tuple(_epsilons(schedule, delta, None).items())


def _epsilons(schedule: Schedule, delta: float, sensitivities) -> dict:
    if schedule.noise_multiplier == 0:
        return {"rdp": math.inf, "pld": math.inf, "epsilon": math.inf, "accountant": "none (no noise)"}
    counts = _ratio_counts(schedule, sensitivities)
    if not counts:  # no round's output depends on the differing client
        return {"rdp": 0.0, "pld": 0.0, "epsilon": 0.0, "accountant": "none (no sensitivity)"}
    out = {"rdp": _rdp(schedule, counts, delta), "pld": _pld(schedule, counts, delta)}
    best = min(out, key=out.get)
    return {**out, "epsilon": out[best], "accountant": best}


def _ratio_counts(schedule: Schedule, sensitivities) -> Counter:
    """``{r: rounds}``: how many rounds have sensitivity r times the worst case (grid-rounded up, 0 dropped)."""
    if sensitivities is None:
        return Counter({1.0: schedule.rounds} if schedule.rounds else {})
    s = np.asarray(sensitivities, dtype=float)
    require(len(s) == schedule.rounds, "sensitivities", len(s), f"one per round ({schedule.rounds})")
    r = np.where(np.isnan(s), 1.0, np.minimum(s / schedule.sensitivity, 1.0))
    k = np.ceil(np.log(np.where(r > 0, r, 1.0)) / math.log(GRID) - 1e-9)
    rounded = np.minimum(GRID ** k, 1.0)
    return Counter(float(v) for v in rounded[r > 0])


def _rdp(schedule: Schedule, counts: Counter, delta: float) -> float:
    """RDP's epsilon: the rounds' RDP curves summed (composition adds them, as the library's accountant does with
    ``compose(event, count)``) and converted by the library's ``compute_epsilon``."""
    dpa = require_extra("privacy")
    total = sum(n * np.asarray(_round_rdp(schedule.clients, schedule.sampled,
                                          min(schedule.noise_multiplier / 2 / r, SIGMA_CAP)))
                for r, n in counts.items())
    return float(dpa.rdp.rdp_privacy_accountant.compute_epsilon(ORDERS, total, delta)[0])


@functools.lru_cache(maxsize=4096)
def _round_rdp(clients: int, sampled: int, sigma: float) -> tuple:
    """The library's RDP curve (at ``ORDERS``) of one round: s of M sampled without replacement, Gaussian
    noise ``sigma`` times the sensitivity. Cached: the measured schedules of a run's pairs share most of
    their grid-rounded rounds, and one curve costs ~15 ms (32 pairs of a sample-perturbation run were 11 s)."""
    dpa = require_extra("privacy")
    from dp_accounting import dp_event as ev

    accountant = dpa.rdp.RdpAccountant(list(ORDERS), dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(ev.SampledWithoutReplacementDpEvent(clients, sampled, ev.GaussianDpEvent(sigma)))
    return tuple(accountant._rdp)  # what the accountant's own get_epsilon reads; the library has no getter


def _pld(schedule: Schedule, counts: Counter, delta: float) -> float:
    dpa = require_extra("privacy")
    from dp_accounting import dp_event as ev

    # T Gaussian mechanisms compose exactly into one with 1/z_eff^2 = sum_t 1/z_t^2 (their shifts add as
    # orthogonal vectors), which the library applies itself to a self-composed Gaussian event: one PLD, not T
    z_eff = schedule.noise_multiplier / math.sqrt(sum(n * r * r for r, n in counts.items()))
    # the privacy loss spans ~1/z_eff^2: its discretisation grows with it (PLD_STEP down to z_eff = 1), which
    # keeps the relative error of epsilon and the time of a weak-noise schedule small
    accountant = dpa.pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE, PLD_STEP * max(1.0, z_eff ** -2))
    accountant.compose(ev.GaussianDpEvent(z_eff))
    with np.errstate(over="ignore"):  # at some z_eff << 1 the library's PLD overflows to inf: RDP's then holds
        return float(accountant.get_epsilon(delta))


__all__ = ["GRID", "ORDERS", "RELATION", "SAMPLING", "Schedule", "check_delta", "epsilons"]
