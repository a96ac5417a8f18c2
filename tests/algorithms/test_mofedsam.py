"""MoFedSAM's pinned update rule (Qu et al. 2022; a FedSWA-paper baseline): SAM around FedCM's client rule.

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, K, fedavg_server, grad, local_models, run_rounds, tiny_run, unit


def test_mofedsam_three_rounds_uses_global_direction():
    """SAM around FedCM: v = alpha g_SAM + (1 - alpha) Delta_t;  y <- y - lr v;  FedAvg server;
    Delta_{t+1} = (1/(s K lr_t)) sum_i (x_t - y_i)  (Delta_0 = 0; used in rounds 2 and 3)."""
    rho, alpha, glr, decay = 0.2, 0.3, 0.8, 0.9
    x, Delta = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t

        def step(i, y):
            eps = rho * unit(grad(i, y))
            return y - lr * (alpha * grad(i, y + eps) + (1 - alpha) * Delta)

        ys = local_models(step, x)
        Delta = sum(x - y for y in ys) / (2 * K * lr)
        x = fedavg_server(x, ys, glr)
    run = tiny_run("mofedsam", {"rho": rho, "alpha_mo": alpha}, global_lr=glr, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["Delta"][0, 0].numpy(), Delta, rtol=0, atol=1e-12)
    assert np.abs(Delta).max() > 0.1

