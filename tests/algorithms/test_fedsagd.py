"""FedSAGD's pinned update rule (FedSAGD paper, Algorithm 1).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, K, grad, local_models, run_rounds, tiny_run


@pytest.mark.parametrize("beta_local", [None, 0.1])
def test_fedsagd_three_rounds_uses_server_momentum(beta_local):
    """Algorithm 1 lines 9-10 (local) and 15-16 (server); v from rounds 1-2 enters rounds 2-3."""
    beta, lam, mu, eta, decay = 0.9, 0.5, 0.2, 0.8, 0.95
    bl = beta if beta_local is None else beta_local
    x, v = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t

        def step(i, y):
            m = bl * v + grad(i, y)  # line 9
            return y - lr * (m + (lam + mu) * y - lam * x)  # line 10

        ys = local_models(step, x)
        delta = np.mean(ys, axis=0) - x
        v = beta / (1 + beta) * v - delta / ((1 + beta) * lr * K)
        x = x + eta * delta
    run = tiny_run("fedsagd", {"beta": beta, "lam": lam, "mu": mu, "beta_local": beta_local},
                   global_lr=eta, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["v"][0, 0].numpy(), v, rtol=0, atol=1e-12)
    assert np.abs(v).max() > 0.1  # the momentum really was exercised

