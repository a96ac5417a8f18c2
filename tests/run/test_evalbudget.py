"""The default evaluation schedule: exact on small data, at most ~25% of the run on paper-sized data."""
import json

import numpy as np
import pytest

from stabkit import RunConfig, TaskOptions, load_run, run_pair
from stabkit.run.evalbudget import EXACT_SAMPLES, MIN_SAMPLES, SHARE, evaluated_rounds, evaluates, plan_evaluation
from stabkit.run.experiment import PairedRun


def test_cifar_sized_data_gets_a_subset_within_the_share():
    # CIFAR-10 with 100 clients, s = 10, K = 50 steps of B = 50: 25,000 samples per model and round
    plan = plan_evaluation(train=50_000, val=5_000, test=10_000, round_samples=10 * 50 * 50)
    assert plan.chosen and plan.every == 1 and plan.fraction == 0.11
    assert plan.share <= SHARE and plan.share > 0.8 * SHARE
    assert plan.train_samples == 5_500 and plan.test_samples == 1_100
    text = plan.describe(50_000, 10_000)
    assert "11% of the data" in text and "all data at the last round" in text and "--eval-fraction 1" in text


def test_tiny_rounds_on_big_data_evaluate_every_few_rounds_on_at_least_the_floor():
    plan = plan_evaluation(train=100_000, val=0, test=10_000, round_samples=5 * 10 * 16)
    assert plan.fraction * 100_000 >= MIN_SAMPLES and plan.every > 1 and plan.share <= SHARE


def test_small_data_and_user_choices_stay_as_they_are():
    small = plan_evaluation(train=1_500, val=300, test=360, round_samples=800)
    assert (small.every, small.fraction) == (1, 1.0) and 1_500 + 660 / 3 <= EXACT_SAMPLES
    given = plan_evaluation(train=50_000, val=5_000, test=10_000, round_samples=25_000, every=1, fraction=1)
    assert (given.every, given.fraction, given.chosen) == (1, 1, False) and given.share > 0.6


def test_default_digits_run_keeps_exact_evaluation_every_round():
    run = PairedRun(RunConfig(pairs=1))
    assert (run.cfg.eval_every, run.cfg.eval_fraction) == (1, 1.0)
    assert run.evaluator.train[1] is run.data.flat_y
    assert run.describe_evaluation().startswith("evaluation: all data every round")


def test_reduced_evaluation_ends_with_the_exact_metrics_and_records_times(tmp_path):
    """Subset every round, all data at the last round: the last row equals the exact run's; the discrepancy
    is exact every round; summary.json records where the time went."""
    base = dict(algo="fedavg", task="synthetic", rounds=4, pairs=2, local_steps=2, dtype="float64",
                task_options=TaskOptions(clients=8, samples_per_client=30))
    run_pair(RunConfig(**base, eval_fraction=0.3), out=tmp_path / "sub")
    run_pair(RunConfig(**base, eval_fraction=1.0, constants=False), out=tmp_path / "all")
    sub, full = load_run(tmp_path / "sub"), load_run(tmp_path / "all")
    assert np.array_equal(sub["disc"], full["disc"])
    last, early = sub["round"] == 4, sub["round"] == 2
    for col in ("train_loss_a", "test_loss_b", "grad_norm_sq_a", "r_e_a"):
        assert np.array_equal(sub.loc[last, col], full.loc[last, col]), col
        assert not np.allclose(sub.loc[early, col], full.loc[early, col], rtol=1e-9), col
    s = json.loads((tmp_path / "sub" / "summary.json").read_text())
    t = s["time"]
    assert t["train_s"] > 0 and t["eval_s"] > 0 and t["constants_s"] > 0
    assert t["total_s"] == pytest.approx(t["wall_s"] + t["constants_s"])
    assert 0 < t["eval_share"] < 1 and 0 < t["constants_share"] < 1
    assert "30% of the data" in s["evaluation"]


def test_time_line_has_the_sharpness_share_including_round_0_and_no_estimated_share(tmp_path):
    """The start line prints the schedule only (its share was a sample-work model that disagreed with the
    measured time); the summary's shares are measured, sharpness (round 0's included) among them."""
    from stabkit.store.summary import format_summary

    cfg = RunConfig(task="quadratic", rounds=2, pairs=1, local_steps=2, sharpness_rounds=(0,), constants=False,
                    task_options=TaskOptions(clients=4, heldout_clients=2, quad_dim=4))
    run = PairedRun(cfg)
    assert "of the run" not in run.describe_evaluation()
    summary = run.run(tmp_path / "r")
    t = json.loads((tmp_path / "r" / "summary.json").read_text())["time"]
    assert t["sharpness_s"] > 0 and 0 < t["sharpness_share"] < 1
    assert t["wall_s"] >= t["train_s"] + t["eval_s"] + t["sharpness_s"]  # round 0's work inside the total
    assert ", sharpness " in format_summary(summary)


def test_evaluated_rounds_counts_what_a_run_evaluates_in_constant_time(tmp_path):
    """One owner of the schedule: the count equals the rounds a run logs metrics for, and the rounds the
    predicate picks, whatever the rounds and interval; 10^9 rounds cost nothing to count."""
    for rounds in range(1, 30):
        for every in range(1, 12):
            picked = [t for t in range(rounds + 1) if evaluates(t, rounds, every)]
            assert evaluated_rounds(rounds, every) == len(picked)
    assert (evaluated_rounds(10, 3), evaluated_rounds(9, 3), evaluated_rounds(10 ** 9, 7)) == (5, 4, 142857144)
    run_pair(RunConfig(rounds=10, pairs=1, eval_every=3, constants=False), out=tmp_path / "r")
    logged = load_run(tmp_path / "r").dropna(subset=["train_loss_a"])["round"].tolist()
    assert logged == [0, 3, 6, 9, 10] == [t for t in range(11) if evaluates(t, 10, 3)]
