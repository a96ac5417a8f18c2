"""FedCM's pinned update rule, both server steps (FedSAGD paper App. C.7).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, K, grad, local_models, pair0, run_rounds, tiny_run


@pytest.mark.parametrize("server", ["model", "gradient"])
def test_fedcm_three_rounds(server):
    """Delta_{t+1} = -mean d / (eta_l K) with the decayed lr; x + eta mean d (model) or x - eta Delta (gradient)."""
    alpha, eta, decay = 0.3, 0.7, 0.9
    x, D = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t
        ds = [y - x for y in local_models(lambda i, y: y - lr * (alpha * grad(i, y) + (1 - alpha) * D), x)]
        D = -np.mean(ds, axis=0) / (lr * K)
        x = x + eta * np.mean(ds, axis=0) if server == "model" else x - eta * D
    run = tiny_run("fedcm", {"alpha": alpha, "server": server}, global_lr=eta, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["Delta"]), D, rtol=0, atol=1e-12)

