"""``run_audit``: the audit's lower bound on a DP algorithm's epsilon, from trials that run as pairs in the engine.

A trial is a pair of the run ``cfg`` describes, with independent noise (``dp_noise=independent``): trajectory A's
final model is one output on D, trajectory B's one on its neighbour D'. All trials run batched, as ``trials``
pairs. The test statistic is the projection of the final model on the direction that separates the two inputs
without noise: the same pairs are run once more with the noise off (the noiseless references x̄_A, x̄_B, which
share the trial's cohorts, minibatches and initial model but no noise), and

    score(x) = < x - (x̄_A + x̄_B) / 2, (x̄_B - x̄_A) / ||x̄_B - x̄_A|| >.

With one round and full participation this is the likelihood-ratio test of the Gaussian mechanism (the outputs
are x̄ plus isotropic Gaussian noise). The statistic knows each trial's cohorts, so with partial participation it
audits the mechanism with its sampling revealed: compare it with the accountant's PLD epsilon, which takes no
sampling amplification. The threshold and epsilon_lower come from ``stabkit.privacy.audit``.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional

import torch

from stabkit.config.runconfig import RunConfig
from stabkit.engine.determinism import deterministic
from stabkit.engine.paired import PairedEngine
from stabkit.errors import ConfigError
from stabkit.privacy.accountant import check_delta, epsilons
from stabkit.privacy.audit import check_trials, epsilon_lower
from stabkit.privacy.report import AUDIT_FILE
from stabkit.run.experiment import PairedRun
from stabkit.run.loop import EngineRounds, run_rounds
from stabkit.store.atomic import atomic_write_json
from stabkit.store.outdir import check_writable, prepare_dir

STATISTIC = ("projection of the final model on the noiseless separating direction (x̄_B - x̄_A), centred at "
             "(x̄_A + x̄_B) / 2; x̄ from the same pairs with the noise off")


def audit_scores(cfg: RunConfig, trials: int) -> tuple:
    """``(scores on D, scores on D', run)``: ``trials`` pairs of ``cfg`` with independent noise, and their
    noiseless references; refused (one line) unless the algorithm has a DP layer."""
    run = PairedRun(cfg.replace(pairs=trials, dp_noise="independent", constants=False))
    if run.algo.dp_params() is None:
        raise ConfigError(f"invalid algo={cfg.algo!r}: this run adds no noise: epsilon = infinity (audit "
                          f"--algo dp_fedavg or --wrap dp:clip=...,noise_multiplier=...)")
    noisy = run.engine
    noisy.measure_sensitivity = False
    reference = PairedEngine(dataclasses.replace(noisy.cfg, dp_noise="off"), run.algo, run.model, run.data,
                             run.nb, noisy.x[:, 0].clone())
    reference.measure_sensitivity = False
    with deterministic():
        run_rounds(EngineRounds((noisy, reference), cfg.rounds))
    x_bar = reference.x
    direction = x_bar[:, 1] - x_bar[:, 0]
    norm = direction.norm(dim=-1, keepdim=True)
    unit = direction / norm.where(norm > 0, torch.ones_like(norm))
    centred = noisy.x - (x_bar[:, :1] + x_bar[:, 1:]) / 2
    scores = (centred * unit[:, None, :]).sum(dim=-1).double().cpu().numpy()
    return scores[:, 0], scores[:, 1], run


def run_audit(cfg: RunConfig, trials: int, delta: float, out: Optional[Path] = None) -> dict:
    """Audit ``cfg``'s algorithm with ``trials`` pairs; write ``out/audit.json`` (when given) and return it,
    with the accountant's epsilon of the same schedule beside the lower bound."""
    delta = check_delta(delta)
    check_trials(trials, delta)
    if out is not None:
        check_writable(out)  # refused up front; created only once the audit has a result
    scores_d, scores_d2, run = audit_scores(cfg, trials)
    result = epsilon_lower(scores_d, scores_d2, delta)
    accountant = epsilons(run.privacy, delta)
    record = {**result, "statistic": STATISTIC, "epsilon_accountant": accountant["epsilon"],
              "accountant": accountant, "schedule": run.privacy.to_dict(), "config": run.cfg.to_dict()}
    if out is not None:
        atomic_write_json(prepare_dir(out) / AUDIT_FILE, record)
    return record


__all__ = ["STATISTIC", "audit_scores", "run_audit"]
