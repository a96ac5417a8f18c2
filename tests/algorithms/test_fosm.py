"""Libra's server momentum: FOSM, FedAvgM, FOSM-EMA and the second-order form
(Libra, Algorithm 1 option (ii) and App. D).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, K, grad, local_sgd, lockstep, pair0, tiny_run


def test_fosm_three_rounds_libra_convention():
    """d^t = x^t - mean_i y_i;  m^t = beta m^{t-1} + nu d^t (m^{-1} = 0);  x^{t+1} = x^t - eta_g m^t."""
    beta, nu, eta = 0.7, 0.6, 0.8
    run = tiny_run("fosm", {"beta": beta, "nu": nu}, global_lr=eta)
    x, m = np.zeros(2), np.zeros(2)
    for t in range(3):
        ys = [local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)]
        d = x - np.mean(ys, axis=0)
        m = beta * m + nu * d
        x = x - eta * m
        run.step()
        np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), m, rtol=0, atol=1e-12)
    assert np.abs(m).max() > 0.05


def test_fedavgm_agrees_with_fedsagd_spec_sign_convention():
    """FedAvgM (Hsu et al. 2019): m_{t+1} = beta m_t + mean_i (y_i - x_t), x_{t+1} = x_t + eta m_{t+1}; that buffer
    is minus Libra's m (d = -delta), and the models agree."""
    beta, eta = 0.9, 0.5
    run = tiny_run("fedavgm", {"beta": beta}, global_lr=eta)
    x, m_s = np.zeros(2), np.zeros(2)
    for t in range(3):
        ys = [local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)]
        m_s = beta * m_s + np.mean([y - x for y in ys], axis=0)
        x = x + eta * m_s
        run.step()
    np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), -m_s, rtol=0, atol=1e-12)


def test_fosm_ema_is_an_ema_of_d():
    """fosm_ema: nu = 1 - beta, so m^t = (1 - beta) sum_tau beta^{t - tau} d^tau (an EMA, m^{-1} = 0)."""
    beta = 0.6
    run = tiny_run("fosm_ema", {"beta": beta})
    x, ds = np.zeros(2), []
    for t in range(3):
        ys = [local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)]
        ds.append(x - np.mean(ys, axis=0))
        m = sum((1 - beta) * beta ** (t - tau) * ds[tau] for tau in range(t + 1))
        x = x - 1.0 * m
        run.step()
        np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), m, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)


def test_fosm_second_order_recursion():
    """Libra App. D: x^{t+1} = (1 + beta) x^t - beta x^{t-1} - eta_g nu d^t (constant eta_g), with d^t
    computed by hand from the engine's x^t."""
    beta, nu, eta = 0.5, 0.8, 0.9
    run = tiny_run("fosm", {"beta": beta, "nu": nu}, global_lr=eta)
    xs = [pair0(run.engine.x).copy()]
    for t in range(4):
        run.step()
        xs.append(pair0(run.engine.x).copy())
    for t in range(1, 4):
        x = xs[t]
        d = x - np.mean([local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)], axis=0)
        np.testing.assert_allclose(xs[t + 1], (1 + beta) * x - beta * xs[t - 1] - eta * nu * d,
                                   rtol=0, atol=1e-12)


def test_fosm_beta0_is_server_sgd_with_scaled_global_lr():
    """Libra, Algorithm 1: option (ii) with beta = 0 and nu = 0.5 equals option (i) with eta_g <- nu eta_g
    (float64 real run; to 1e-12, the products are associated differently)."""
    nu, eta = 0.5, 0.8
    for t, (ra, rb) in lockstep(("fosm", {"beta": 0.0, "nu": nu}, dict(global_lr=eta)),
                                 ("fedavg", {}, dict(global_lr=nu * eta)), dtype="float64"):
        assert (ra.engine.x - rb.engine.x).abs().max().item() <= 1e-12, f"differs after round {t}"

