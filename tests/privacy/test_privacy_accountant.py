"""The accountant's epsilon (stabkit.privacy.accountant): exact for one round against the analytic Gaussian
mechanism (Balle & Wang 2018, written out here with scipy), measured epsilons never above it, what a run writes."""
import json
import math

import numpy as np
import pytest
from scipy import optimize, stats

from stabkit import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError
from stabkit.privacy.accountant import SIGMA_CAP, Schedule, epsilons
from stabkit.run.experiment import run_pair

DELTA = 1e-5


def analytic_gaussian_epsilon(ratio: float, delta: float) -> float:
    """Balle & Wang 2018, Theorem 8: the Gaussian mechanism with std/sensitivity ``ratio`` is (eps, delta)-DP for
    the smallest eps with Phi(1/(2r) - eps r) - e^eps Phi(-1/(2r) - eps r) <= delta."""
    phi = stats.norm.cdf

    def excess(eps):
        return phi(1 / (2 * ratio) - eps * ratio) - math.exp(eps) * phi(-1 / (2 * ratio) - eps * ratio) - delta

    return optimize.brentq(excess, 0.0, 500.0, xtol=1e-12)


@pytest.mark.parametrize("z", [1.0, 2.2, 4.0])
def test_one_round_full_participation_is_the_analytic_gaussian_mechanism(z, tmp_path):
    """One round of DP-FedAvg on the quadratic, all 6 clients: std z C / s over sensitivity 2C/s is z / 2."""
    cfg = RunConfig(algo="dp_fedavg", hp={"clip": 0.3, "noise_multiplier": z}, task="quadratic", rounds=1, pairs=2,
                    clients_per_round=6, task_options=TaskOptions(clients=6, heldout_clients=2, quad_dim=4,
                                                                  samples_per_client=8),
                    perturb="client", client_mode="population", constants=False, local_steps=2, batch_size=4)
    run_pair(cfg, tmp_path)
    record = json.loads((tmp_path / "privacy.json").read_text())
    expected = analytic_gaussian_epsilon(z / 2, DELTA)
    assert record["epsilon_accountant"] == pytest.approx(expected, rel=1e-3)
    assert record["accountant"]["accountant"] == "pld"
    assert record["schedule"]["sensitivity"] == pytest.approx(2 * 0.3 / 6)
    assert record["schedule"]["noise_std"] == pytest.approx(z * 0.3 / 6)
    assert 0 < record["epsilon_measured"] <= record["epsilon_accountant"]


def test_the_rdp_accountant_agrees_with_its_closed_form_without_sampling():
    """Full participation, T rounds: RDP of the Gaussian is T alpha / (2 (z/2)^2), converted at delta by the
    library; checked against the standard conversion eps = min_alpha RDP + log(1/delta)/(alpha-1) (an upper
    bound of the library's improved conversion, and within 15% of it here)."""
    schedule = Schedule(rounds=10, clients=5, sampled=5, clip=1.0, noise_multiplier=4.0)
    got = epsilons(schedule, DELTA)
    orders = np.array([1.25, 1.5, 1.75, 2, 2.5, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64])
    classic = np.min(10 * orders / (2 * 2.0 ** 2) + math.log(1 / DELTA) / (orders - 1))
    assert got["rdp"] <= classic
    assert got["rdp"] >= 0.85 * classic
    assert got["pld"] == pytest.approx(analytic_gaussian_epsilon(2.0 / math.sqrt(10), DELTA), rel=1e-3)


def test_summed_round_curves_equal_the_librarys_own_composition():
    """The measured schedule's RDP sums cached per-round curves; the library's accountant composing the same
    events itself gives the same epsilon (to rounding), and PLD_STEP keeps PLD within 2e-4 of the default."""
    import dp_accounting as dpa
    from dp_accounting import dp_event as ev

    from stabkit.privacy.accountant import ORDERS

    schedule = Schedule(rounds=40, clients=20, sampled=5, clip=1.0, noise_multiplier=1.3)
    s = np.random.default_rng(3).uniform(0, schedule.sensitivity, schedule.rounds)
    s[::3] = np.nan
    got = epsilons(schedule, DELTA, s)
    library = dpa.rdp.RdpAccountant(list(ORDERS), dpa.NeighboringRelation.REPLACE_ONE)
    r = np.where(np.isnan(s), 1.0, s / schedule.sensitivity)
    for rt in np.minimum(1.05 ** np.ceil(np.log(r) / np.log(1.05) - 1e-9), 1.0):
        sigma = schedule.noise_multiplier / 2 / rt
        library.compose(ev.SampledWithoutReplacementDpEvent(20, 5, ev.GaussianDpEvent(sigma)))
    assert got["rdp"] == pytest.approx(library.get_epsilon(DELTA), rel=1e-12)
    z_eff = schedule.noise_multiplier / math.sqrt(schedule.rounds)
    fine = dpa.pld.PLDAccountant(dpa.NeighboringRelation.REPLACE_ONE, 1e-4 * max(1.0, z_eff ** -2))
    fine.compose(ev.GaussianDpEvent(z_eff))
    assert fine.get_epsilon(DELTA) <= epsilons(schedule, DELTA)["pld"] <= fine.get_epsilon(DELTA) * (1 + 2e-4)


@pytest.mark.parametrize("sampled", [4, 10])
def test_measured_epsilon_never_exceeds_the_accountants(sampled):
    schedule = Schedule(rounds=30, clients=10, sampled=sampled, clip=1.0, noise_multiplier=1.5)
    worst = epsilons(schedule, DELTA)
    gen = np.random.default_rng(0)
    for _ in range(5):
        s = gen.uniform(0, schedule.sensitivity, schedule.rounds)
        s[gen.random(schedule.rounds) < 0.4] = np.nan
        measured = epsilons(schedule, DELTA, s)
        assert measured["epsilon"] < worst["epsilon"]
        assert measured["rdp"] <= worst["rdp"] and measured["pld"] <= worst["pld"]
    unmeasured = epsilons(schedule, DELTA, np.full(schedule.rounds, np.nan))
    assert unmeasured == worst  # rounds without a measurement take the worst case
    assert epsilons(schedule, DELTA, np.zeros(schedule.rounds))["epsilon"] == 0.0


def test_a_tiny_measured_sensitivity_is_accounted_at_the_capped_noise():
    """One differing sample moves a sampled round's mean by ~1e-6 of the worst case: the library's sampled RDP
    fails at such noise ("math domain error"), so the round counts at SIGMA_CAP, a small positive epsilon
    below the worst case's (found by a DP-FedAvg atlas cell with sample perturbation)."""
    schedule = Schedule(rounds=50, clients=20, sampled=4, clip=1.0, noise_multiplier=1.0)
    tiny = np.full(schedule.rounds, 1e-6 * schedule.sensitivity)
    got = epsilons(schedule, DELTA, tiny)
    assert 0 < got["rdp"] < epsilons(schedule, DELTA)["rdp"] and 0 <= got["pld"] < 1e-3
    capped = Schedule(rounds=50, clients=20, sampled=4, clip=1.0, noise_multiplier=2 * SIGMA_CAP)
    assert got["rdp"] == pytest.approx(epsilons(capped, DELTA)["rdp"])  # the same events, at the cap


def test_no_noise_is_infinite_epsilon_no_round_is_zero_and_delta_must_be_in_0_1():
    assert epsilons(Schedule(3, 4, 4, 1.0, 0.0), DELTA)["epsilon"] == math.inf
    assert epsilons(Schedule(0, 4, 4, 1.0, 1.0), DELTA)["epsilon"] == 0.0  # a run stopped before its first round
    for bad in (0, 1, -0.1, 1.5, "x"):
        with pytest.raises(ConfigError, match="invalid delta="):
            epsilons(Schedule(3, 4, 4, 1.0, 1.0), bad)


def test_measured_epsilon_is_never_above_the_worst_case_when_another_accountant_wins_it():
    """Found by the atlas (DP-FedAvg, z = 0.5, sample perturbation): 72 unmeasured rounds and 28 tiny ones. The
    library's PLD of the measured schedule (z_eff = 0.5 / sqrt(72)) overflows to inf, so RDP's 1026 would be
    reported, above the worst case's PLD of 970.8; the worst case holds for every instance and is reported."""
    import warnings

    schedule = Schedule(rounds=100, clients=20, sampled=5, clip=1.0, noise_multiplier=0.5)
    s = np.full(100, np.nan)
    s[:28] = 3e-4 * schedule.sensitivity
    worst = epsilons(schedule, DELTA)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the library's overflow is handled, not printed
        measured = epsilons(schedule, DELTA, s)
    assert measured["rdp"] > worst["epsilon"] and measured["pld"] == math.inf
    assert measured["epsilon"] == worst["epsilon"] and measured["accountant"] == "pld (the worst case)"
