"""The audit's lower bound (stabkit.privacy.audit, stabkit.run.audit): certification on a simulated Gaussian
mechanism of known epsilon, hand values of its pieces, and the engine's trials on the quadratic."""
import math

import numpy as np
import pytest
from scipy import optimize, stats

from stabkit import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError
from stabkit.privacy.audit import epsilon_lower, minimum_trials, upper_bound
from stabkit.run.audit import audit_scores, run_audit

DELTA = 1e-5


def sigma_for(eps: float, delta: float) -> float:
    """The std (sensitivity 1) of the Gaussian mechanism that is exactly (eps, delta)-DP (Balle & Wang 2018)."""
    phi = stats.norm.cdf

    def excess(s):
        return phi(1 / (2 * s) - eps * s) - math.exp(eps) * phi(-1 / (2 * s) - eps * s) - delta

    return optimize.brentq(excess, 0.05, 50.0, xtol=1e-12)


def gaussian_trials(seed: int, trials: int, sigma: float):
    g = np.random.default_rng(seed)
    return g.normal(0.0, sigma, trials), g.normal(1.0, sigma, trials)


def test_the_audit_certifies_the_gaussian_mechanism_and_never_exceeds_its_epsilon():
    """True epsilon 2 at delta 1e-5: 10^4 trials certify at least 0.75 (seed 0), and over 20 seeds the bound
    stays below 2 (its failure probability is at most 10% per seed, far less here: the threshold test is
    not tight against the DP region at the thresholds it can resolve)."""
    sigma = sigma_for(2.0, DELTA)
    first = epsilon_lower(*gaussian_trials(0, 10_000, sigma), DELTA)
    assert first["epsilon_lower"] >= 0.75
    assert first["evaluated"] == 5_000
    values = [epsilon_lower(*gaussian_trials(seed, 10_000, sigma), DELTA)["epsilon_lower"] for seed in range(20)]
    assert max(values) < 2.0
    assert np.median(values) > 0.7


def test_clopper_pearson_upper_bounds_by_hand():
    assert float(upper_bound(0, 100)) == pytest.approx(1 - 0.05 ** (1 / 100), rel=1e-12)  # (1 - p)^n = 0.05
    assert float(upper_bound(100, 100)) == 1.0
    k, n = 7, 50  # P(Binomial(n, p_hi) <= k) = 0.05 at the upper bound
    assert stats.binom.cdf(k, n, float(upper_bound(k, n))) == pytest.approx(0.05, rel=1e-9)


def test_too_few_trials_is_refused_naming_how_many_are_needed():
    """With one-sided 95% bounds and no error, n evaluated trials give log((1 - delta - u) / u), u = 1 - 0.05^(1/n):
    positive from n = 5 (u = 0.451) on, not at n = 4 (u = 0.527), so 10 trials in all."""
    assert minimum_trials(DELTA) == 10
    perfect = epsilon_lower(np.zeros(10), np.ones(10), DELTA)
    u = 1 - 0.05 ** (1 / 5)
    assert perfect["epsilon_lower"] == pytest.approx(math.log((1 - DELTA - u) / u), rel=1e-9)
    with pytest.raises(ConfigError, match=r"invalid trials=9: at least 10 are needed"):
        epsilon_lower(np.zeros(9), np.ones(9), DELTA)


def quadratic(**kw):
    options = dict(clients=6, heldout_clients=2, quad_dim=4, samples_per_client=8)
    return RunConfig(task="quadratic", rounds=1, clients_per_round=6, task_options=TaskOptions(**options),
                     perturb="client", client_mode="population", local_steps=2, batch_size=4, **kw)


def test_engine_trials_are_the_gaussian_mechanism_in_one_round():
    """One round, all clients: A's score is -||v|| / 2 + N(0, (z C / s)^2) and B's is +||v|| / 2 + N(0, ...),
    v the noiseless difference of the pair's models (global lr 1)."""
    clip, z = 0.05, 2.0
    d, d2, run = audit_scores(quadratic(algo="dp_fedavg", hp={"clip": clip, "noise_multiplier": z}), 4000)
    std = z * clip / 6
    assert np.std(d) == pytest.approx(std, rel=0.05) and np.std(d2) == pytest.approx(std, rel=0.05)
    assert np.mean(d2 - d) > 0
    assert np.mean(d + d2) == pytest.approx(0.0, abs=3 * std * math.sqrt(2 / 4000))


def test_engine_audit_stays_below_the_accountant(tmp_path):
    record = run_audit(quadratic(algo="fedavg", wrap="dp:clip=0.05,noise_multiplier=1.0"), 2000, DELTA, tmp_path)
    assert 0 <= record["epsilon_lower"] <= record["epsilon_accountant"]
    assert (tmp_path / "audit.json").is_file()


def test_auditing_an_algorithm_without_noise_is_refused():
    with pytest.raises(ConfigError, match="this run adds no noise: epsilon = infinity"):
        audit_scores(quadratic(algo="fedavg"), 20)
