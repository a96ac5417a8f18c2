"""``finetune``: ``rounds`` rounds of the run's own algorithm on the remaining clients, from x_T^A (fresh
algorithm state, cohorts of s clients drawn among the M - 1 remaining ones, the run's lrs). The simplest
retraining-based unlearning: cost ``rounds * s * K`` client steps against the retrain's ``T * s * K``."""
from __future__ import annotations

from dataclasses import dataclass

from stabkit.algorithms.base import HParams, hp
from stabkit.unlearn.base import Unlearned, UnlearningMethod


@dataclass(frozen=True)
class FinetuneParams(HParams):
    rounds: int = hp(5, "rounds of the run's algorithm on the remaining clients", low=1)


class Finetune(UnlearningMethod):
    name = "finetune"
    title = "Fine-tune on the remaining clients"
    reference = "continued training without the forgotten client (e.g. the FATS/FedEraser papers' baselines)"
    params_cls = FinetuneParams
    integers = ("rounds",)

    def unlearn(self, ctx) -> Unlearned:
        x, steps = ctx.algorithm_rounds(ctx.x_final, int(self.p.rounds))
        return Unlearned(x, steps)
