"""Invariants every registered algorithm must satisfy on a real paired run.

* the null pair has exactly zero discrepancy (parameters and algorithm state) every round;
* the same seed gives identical metrics;
* client perturbation really separates the runs;
* SAM-type methods use two gradient evaluations per local step, FedLESAM one, everything else one
  (MimeLite adds one full local gradient at x_t per round: (K + 1) / K).
"""
import numpy as np
import pandas as pd
import pytest

from stabkit import RunConfig
from stabkit.algorithms import ALGORITHMS
from stabkit.run.experiment import PairedRun
from tests.helpers import metrics, tiny_run

TWO_GRADIENTS = {"fedsam", "mofedsam", "fedasam"}
POPULATION_SCALED = {"feddyn", "scaffold"}  # server rules with s / M
COMMON = dict(rounds=4, pairs=2, local_steps=3, eval_every=2, local_rounds=(1,))


def run_rounds(cfg):
    """All rounds of ``cfg`` through the public ``PairedRun.step`` (logged); the gradient evaluations per round."""
    run = PairedRun(cfg)
    evals = [run.step().grad_evals for _ in range(cfg.rounds)]
    return run, evals


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_null_pair_is_exactly_zero_and_runs_are_deterministic(algo):
    cfg = RunConfig(algo=algo, perturb="none", **COMMON)
    run, evals = run_rounds(cfg)
    df = metrics(run)
    assert list(df["round"].unique()) == list(range(cfg.rounds + 1)) and run.finite
    assert (df["disc"] == 0).all()
    state_cols = [c for c in df if c.startswith("disc_") and c != "disc_sq"]
    assert set(state_cols) == {f"disc_{n}" for n in run.algo.server_state}
    assert (df[state_cols] == 0).all().all()
    for name, value in run.engine.client_state.items():
        assert np.array_equal(value[:, 0].numpy(), value[:, 1].numpy()), name
    again, _ = run_rounds(cfg)
    assert (run.engine.x == again.engine.x).all()
    pd.testing.assert_frame_equal(df, metrics(again))
    K = cfg.local_steps
    expected = 2.0 if algo in TWO_GRADIENTS else (K + 1) / K if algo == "mimelite" else 1.0
    assert evals == [expected] * cfg.rounds


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_client_perturbation_separates_the_runs(algo):
    run, _ = run_rounds(RunConfig(algo=algo, perturb="client", **COMMON))
    disc = run.engine.discrepancy()
    assert np.isfinite(disc).all() and (disc > 0).all()


@pytest.mark.parametrize("algo,expected", [("fedavg", 1.0), ("fedsam", 2.0), ("fedasam", 2.0),
                                           ("mofedsam", 2.0), ("fedlesam", 1.0)])
def test_gradient_evaluations_per_local_step(algo, expected):
    run = tiny_run(algo)
    assert [run.step().grad_evals for t in range(3)] == [expected] * 3
    run = PairedRun(RunConfig(algo=algo, rounds=2, pairs=1, local_steps=3))
    assert [run.step().grad_evals for t in range(2)] == [expected] * 2


@pytest.mark.parametrize("perturb", ["remove-client", "remove-sample"])
@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_removal_separates_the_runs_exactly_from_the_first_hit(algo, perturb):
    """Leave-one-out pairs run for every algorithm: B stays exactly A until the removed client is sampled
    (remove-client) or the removed sample is drawn (remove-sample), and differs from then on. Rules that scale
    by the population (FedDyn's and SCAFFOLD's s / M) read B's M - 1 and separate the runs whether or not the
    removed client was sampled."""
    run = PairedRun(RunConfig(algo=algo, perturb=perturb, clients_per_round=4, **COMMON))
    hit = np.zeros(run.cfg.pairs, dtype=bool)
    for _ in range(run.cfg.rounds):
        hit |= run.step().hit
        disc = run.engine.discrepancy()
        assert np.isfinite(disc).all()
        if not (algo in POPULATION_SCALED and perturb == "remove-client"):
            assert ((disc > 0) == hit).all(), (disc, hit)
    assert hit.any() and (disc > 0).any()
