"""A DP run's ``privacy.json``: its schedule, the accountant's epsilon and the measured one, at delta 1e-5.

Written when the run finishes (also when it stops early: the schedule then has the rounds done, which is what the
run spent). The measured epsilon is per pair (each pair is its own neighbouring instance), from the
``dp_sensitivity`` column; the file's ``epsilon_measured`` is the largest over pairs. ``stabkit privacy RUN``
recomputes both for another delta from this file's schedule and the metrics.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from stabkit.extras import require_extra
from stabkit.privacy.accountant import Schedule, epsilons
from stabkit.store.rundir import RunDir

DEFAULT_DELTA = 1e-5


def run_schedule(algo, clients: int, sampled: int, rounds: int) -> Optional[Schedule]:
    """The schedule of a run of ``algo`` (None when it has no DP layer); the accounting library is required
    now, before anything is written, since the run reports epsilon."""
    dp = algo.dp_params()
    if dp is None:
        return None
    require_extra("privacy")
    return Schedule(rounds, clients, sampled, dp.clip, dp.noise_multiplier)


def measured_epsilons(schedule: Schedule, df, delta: float) -> list:
    """Per pair, the accountants' epsilons with the pair's measured sensitivities of the logged rounds."""
    rounds = df[df["round"] >= 1].sort_values(["pair", "round"])
    return [epsilons(schedule, delta, group["dp_sensitivity"].to_numpy(dtype=float))
            for _, group in rounds.groupby("pair")]


def privacy_record(schedule: Schedule, df, delta: float, dp_noise: str) -> dict:
    """``privacy.json``'s content for the logged rounds of ``df`` (the schedule takes their number)."""
    done = int(df["round"].max())
    schedule = Schedule(done, schedule.clients, schedule.sampled, schedule.clip, schedule.noise_multiplier)
    accountant = epsilons(schedule, delta)
    measured = measured_epsilons(schedule, df, delta) if done else []
    worst = max((m["epsilon"] for m in measured), default=0.0)
    return {"schedule": schedule.to_dict(), "delta": delta, "dp_noise": dp_noise,
            "epsilon_accountant": accountant["epsilon"], "accountant": accountant,
            "epsilon_measured": worst, "measured_per_pair": measured,
            "measured_mean": float(np.mean([m["epsilon"] for m in measured])) if measured else 0.0}


def summary_line(out: Path) -> Optional[str]:
    """One line of a DP run's epsilons at the default delta for ``stabkit pair``'s summary (None without DP)."""
    r = RunDir(out).privacy
    if r is None:
        return None
    acc, measured = r["epsilon_accountant"], r["epsilon_measured"]
    if acc is None:  # written as null: infinite
        return f"privacy: this run adds no noise: epsilon = infinity (delta {r['delta']:g})"
    return (f"privacy at delta {r['delta']:g}: epsilon_accountant {acc:.4g} ({r['accountant']['accountant']}), "
            f"epsilon_measured {measured:.4g} (largest over pairs); `stabkit privacy {out}` for more")


class PrivacyFile:
    """The round loop's callback (``stabkit.run.loop``) of a DP run writing into ``out``: when the run ends
    (finished, diverged, interrupted or failed), ``privacy.json`` of the rounds its ``metrics.csv`` holds
    (the logs are flushed by then)."""

    def __init__(self, out: Path, schedule: Schedule, dp_noise: str):
        self.out, self.schedule, self.dp_noise = Path(out), schedule, dp_noise

    @classmethod
    def of(cls, out: Path, schedule: Optional[Schedule], dp_noise: str) -> list:
        """The callbacks a run of ``schedule`` needs: this one for a DP run, none without DP."""
        return [] if schedule is None else [cls(out, schedule, dp_noise)]

    def on_run_end(self, run, state) -> None:
        rundir = RunDir(self.out)
        rundir.write_privacy(privacy_record(self.schedule, rundir.metrics(), DEFAULT_DELTA, self.dp_noise))


__all__ = ["DEFAULT_DELTA", "PrivacyFile", "measured_epsilons", "privacy_record", "run_schedule",
           "summary_line"]
