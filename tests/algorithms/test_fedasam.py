"""FedASAM's pinned update rule (Caldarola et al. 2022; a FedSWA-paper baseline): adaptive SAM around FedAvg's
client rule.

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, fedavg_server, grad, local_models, run_rounds, tiny_run


def test_fedasam_two_rounds():
    """T = |y| + eta (element-wise);  eps = rho T^2 g / ||T g||;  y <- y - lr grad(y + eps)."""
    rho, eta, glr = 0.5, 0.1, 0.7

    def step(i, y):
        g = grad(i, y)
        T = np.abs(y) + eta
        eps = rho * T * T * g / np.linalg.norm(T * g)
        return y - LR * grad(i, y + eps)

    x = np.zeros(2)
    for _ in range(2):
        ys = local_models(step, x)
        x = fedavg_server(x, ys, glr)
    run = tiny_run("fedasam", {"rho": rho, "eta_asam": eta}, global_lr=glr)
    np.testing.assert_allclose(run_rounds(run, 2), x, rtol=0, atol=1e-12)

