"""The default evaluation schedule: exact where it is cheap, bounded to a share of the run where it is not.

Per-round evaluation computes every model's loss and full gradient on *all* training data (plus forward
passes on the validation and test splits); a round trains each model on only ``s K B`` samples. On a
paper-sized data set (CIFAR-10: 50,000 samples against 10 x 50 x 50 = 25,000 per round) evaluating every
round on everything is most of the run. When ``--eval-every`` / ``--eval-fraction`` are not given, they
are chosen here from the data size, in sample-gradient units (a forward pass counts 1/3):

* evaluation per round at most ``EXACT_SAMPLES`` units per model (``EVAL_COST`` training units each), or at most ``SHARE`` of the round's
  total: all data every round (exact curves; the default digits run stays exact);
* otherwise the largest fraction (two decimals) of every client's data and of the test set that keeps the
  share at ``SHARE``, but not fewer than ``MIN_SAMPLES`` training samples; if that floor still costs more,
  evaluation every few rounds. The last round is always evaluated on all data (``Evaluator`` full).

The choice depends on the data and the round's size only (not on the number of rounds), so a resumed
run with more rounds evaluates exactly as an uninterrupted one. The discrepancy is exact every round.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SHARE = 0.25  # target share of the run's time spent evaluating
EXACT_SAMPLES = 5000  # per-model evaluation units per round below which evaluation stays exact
MIN_SAMPLES = 2000  # fewest training samples a reduced evaluation uses
FORWARD = 1 / 3  # cost of a forward-only sample relative to a forward + backward one
EVAL_COST = 1.3  # an evaluated sample-gradient costs this many training ones (FedAvg CNN, CIFAR shapes, 2 cores:
#                  benchmarks/long_runs.py measured 1.3; the loss pass keeps per-sample losses, in chunks)



def evaluates(t: int, rounds: int, every: int) -> bool:
    """Whether round ``t`` of a run of ``rounds`` rounds is evaluated: round 0, every ``every``-th, and the last."""
    return t % every == 0 or t == rounds


def evaluated_rounds(rounds: int, every: int) -> int:
    """How many of the rounds 0..``rounds`` :func:`evaluates` picks, counted without walking the rounds (a run
    may have 10^9 of them)."""
    return rounds // every + 1 + (rounds % every != 0)

@dataclass(frozen=True)
class EvalPlan:
    every: int
    fraction: float
    train_samples: int  # training samples (all rows) the per-round evaluation uses, per model
    test_samples: int
    share: float  # expected share of a round's time spent evaluating, averaged over rounds
    chosen: bool  # chosen here (False: given by the user)

    def describe(self, total_train: int, total_test: int) -> str:
        """One line for the user: what is evaluated, how often, and how to get exact curves."""
        # no share of the run here: the plan's share is a sample-work model, not time; the summary's time
        # line gives the measured share at the end
        if self.every == 1 and self.fraction >= 1:
            cheap = f" (cheap at {total_train:,} training samples)" if self.chosen else ""
            return f"evaluation: all data every round{cheap}"
        how = (f"every {self.every} rounds" if self.every > 1 else "every round") + (
            f" on {self.fraction:.0%} of the data ({self.train_samples:,} of {total_train:,} training, "
            f"{self.test_samples:,} of {total_test:,} test samples)" if self.fraction < 1 else " on all data")
        how += ", all data at the last round"
        source = " (chosen from the data size; exact curves: --eval-every 1 --eval-fraction 1)" if self.chosen else ""
        return f"evaluation: {how}{source}"


def plan_evaluation(train: int, val: int, test: int, round_samples: float, every=None, fraction=None) -> EvalPlan:
    """``train``: training samples one model is evaluated on (the task's clients and, under sample
    perturbation, its own neighbour client); ``val``/``test``: samples of those splits; ``round_samples``: samples
    one model trains on per round. ``every``/``fraction`` as given by the user (None: choose)."""
    def cost(f: float) -> float:
        return EVAL_COST * f * (train + FORWARD * (val + test))

    def plan(e: int, f: float, chosen: bool) -> EvalPlan:
        c = cost(f) / e
        return EvalPlan(e, f, min(train, math.ceil(f * train)), min(test, math.ceil(f * test)),
                        c / (c + round_samples), chosen)

    if every is not None or fraction is not None:
        return plan(every or 1, 1.0 if fraction is None else fraction, False)
    budget = round_samples * SHARE / (1 - SHARE)
    full = cost(1.0)
    if full <= max(budget, EXACT_SAMPLES):
        return plan(1, 1.0, True)
    floor = min(1.0, MIN_SAMPLES / train)
    f = max(math.floor(100 * budget / full) / 100, math.ceil(100 * floor) / 100)
    return plan(max(1, math.ceil(cost(f) / budget)), f, True)


def run_plan(cfg, data, train_clients: int) -> EvalPlan:
    """The plan of the run ``cfg`` on its engine's data ``data`` (a ``FederatedData`` whose first
    ``train_clients`` clients train): rows beyond the task's clients belong to one model each."""
    batch = float(np.mean(data.n_np[:train_clients])) if cfg.batch_size == "full" else cfg.batch_size
    first = data.num_task_clients
    per_model = int(data.n_np[:first].sum()) + int(data.n_np[first:].max(initial=0))
    return plan_evaluation(per_model, len(data.val_y), len(data.test_y),
                           cfg.sampled_clients * cfg.local_steps * batch, cfg.eval_every, cfg.eval_fraction)
