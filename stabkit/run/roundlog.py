"""``RoundLog``: the rows a paired run logs after each round, and whether the run has diverged.

One metrics row per pair and round: the discrepancy ``D_t`` (exact every round), the learning rate that
made ``x_t``, the round's record (clipping hits, parameter sizes, gradient evaluations), the server
states' discrepancies and norms, and, on evaluated rounds, every model's losses and accuracies (on the
evaluation subset; on all data at the last round). Local discrepancies are logged at ``--local-rounds``.
Rows are kept as column dicts until the run's writer takes them (``take``).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from stabkit.engine.evaluation import Evaluator
from stabkit.run.evalbudget import evaluates
from stabkit.store.saved_models import TRAJ

# A run counts as diverged once a parameter vector's norm or a loss exceeds this (or is NaN/inf): far beyond
# any trained model, and 1e12 squared still fits float32's range, so the metrics logged up to then are finite
OVERFLOW = 1e12


class RoundLog:
    """The rows of the run ``cfg`` whose state is ``engine``'s, evaluated by ``evaluator``; the time spent
    evaluating goes to the run's ``timers`` (``eval_s``, ``stabkit.run.loop.Timers``)."""

    def __init__(self, cfg, engine, evaluator: Evaluator, timers):
        self.cfg, self.engine, self.evaluator, self.timers = cfg, engine, evaluator, timers
        self.full = evaluator if cfg.eval_fraction >= 1 else None  # all-data evaluator of the last round
        self.rows: list = []  # logged row groups (column dicts) not yet taken
        self.local_rows: list = []

    def evaluates(self, t: int) -> bool:
        return evaluates(t, self.cfg.rounds, self.cfg.eval_every)

    def log(self, t: int, rec, evaluate: bool) -> Optional[str]:
        """Append the rows of round t; return why the run diverged (non-finite or above ``OVERFLOW``) or None."""
        eng, R = self.engine, self.cfg.pairs
        disc = eng.discrepancy()
        cols = {"round": np.full(R, t), "pair": np.arange(R), "disc": disc, "disc_sq": disc ** 2,
                "lr": np.full(R, self.cfg.client_lr(max(t - 1, 0)))}  # row t: the lr of round t - 1 (made x_t)
        if rec is not None:
            cols.update(hit=rec.hit.astype(int), theta_max=rec.theta_max, theta_rms=rec.theta_rms,
                        grad_evals=np.full(R, rec.grad_evals))
            cols.update({} if rec.dp_sensitivity is None else {"dp_sensitivity": rec.dp_sensitivity})
        for name, v in eng.server.items():
            cols[f"disc_{name}"] = (v[:, 0] - v[:, 1]).norm(dim=-1).cpu().numpy()
            for j, tr in enumerate(TRAJ):
                cols[f"norm_{name}_{tr}"] = v[:, j].norm(dim=-1).cpu().numpy()
        norm = float(eng.x.norm(dim=-1).max())
        why = None if norm <= OVERFLOW else ("non-finite parameters" if not np.isfinite(norm) else
                                             f"parameter norm {norm:.3g} > {OVERFLOW:g}")
        if evaluate and why is None:
            why = self._evaluated(cols, self._evaluate(t, rec))
        self.rows.append(cols)
        if rec is not None:
            for k, l1, l2, l3 in rec.local:
                self.local_rows.append({"round": np.full(R, t - 1), "pair": np.arange(R), "k": np.full(R, k),
                                        "l1_a": l1[:, 0], "l1_b": l1[:, 1], "l2": l2, "l3": l3})
        return why

    def take(self) -> tuple:
        """``(rows, local_rows)`` logged since the last call."""
        rows, local, self.rows, self.local_rows = self.rows, self.local_rows, [], []
        return rows, local

    @staticmethod
    def _evaluated(cols: dict, metrics: dict) -> Optional[str]:
        """Add the evaluated metrics to ``cols``; return the first loss that is non-finite or above ``OVERFLOW``."""
        why = None
        for name, v in metrics.items():
            for j, tr in enumerate(TRAJ):
                cols[f"{name}_{tr}"] = v[:, j]
                worst = float(np.max(np.abs(v[:, j])))
                if why is None and not name.endswith("acc") and not worst <= OVERFLOW:
                    why = f"non-finite {name}" if not np.isfinite(worst) else f"{name} {worst:.3g} > {OVERFLOW:g}"
        return why

    def _evaluate(self, t: int, rec) -> dict:
        """Metrics of round t: on the evaluation subset, and on all data at the last round."""
        ev = self.evaluator
        if t == self.cfg.rounds and self.full is None:
            self.full = Evaluator(ev.model, ev.data, ev.nb, 1.0, self.cfg.seed)
            self.full.threads = ev.threads
        evaluator = self.full if t == self.cfg.rounds else ev
        with self.timers.timed("eval_s"):
            return evaluator.evaluate(self.engine.x, None if rec is None else rec.rows)
