"""FedYogi's update rule pinned against a hand computation, and its reductions, with stabkit.testing."""
import numpy as np

from stabkit.testing import (
    LR,
    assert_deterministic,
    assert_null_pair_zero,
    assert_reduces_to,
    grad,
    reference_rounds,
    run_rounds,
    tiny_run,
)
from stabkit_fedyogi.algorithm import FedYogi

HP = {"beta1": 0.9, "beta2": 0.99, "tau": 0.1}


def yogi_server(eta, beta1, beta2, tau):
    """Lines 5-8 of the module docstring in numpy, with m_{-1} = 0, v_{-1} = tau^2."""
    def step(x, ys, state, t):
        delta = np.mean(ys, axis=0) - x
        m = beta1 * state.get("m", np.zeros(2)) + (1 - beta1) * delta
        v_prev = state.get("v", np.full(2, tau ** 2))
        v = v_prev - (1 - beta2) * delta ** 2 * np.sign(v_prev - delta ** 2)
        return x + eta * m / (np.sqrt(v) + tau), {"m": m, "v": v, "signs": state.get("signs", []) + [np.sign(v_prev - delta ** 2)]}
    return step


def test_three_rounds_match_the_paper():
    eta = 0.5
    x, state = reference_rounds(3, lambda i, y, x, t: y - LR * grad(i, y), yogi_server(eta, **HP))
    run = tiny_run(FedYogi, HP, global_lr=eta)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["v"][0, 0].numpy(), state["v"], rtol=0, atol=1e-12)
    signs = np.concatenate(state["signs"])
    assert (signs > 0).any() and (signs < 0).any()  # both branches of line 7 were taken


def test_null_pair_and_determinism():
    assert_null_pair_zero(FedYogi, HP)
    assert_deterministic(FedYogi, HP)


def test_reductions():
    # beta2 = 1 freezes v at tau^2: FedAdam with the same beta1, tau; with beta1 = 0 and tau = 1/2 the
    # server divides by sqrt(1/4) + 1/2 = 1 exactly, which is FedAvg.
    frozen = {"beta1": 0.9, "beta2": 1.0, "tau": 0.01}
    assert_reduces_to(FedYogi, "fedadam", frozen, frozen)
    assert_reduces_to(FedYogi, "fedavg", {"beta1": 0.0, "beta2": 1.0, "tau": 0.5})
