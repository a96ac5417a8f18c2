"""FedAdam's pinned server rule (Reddi et al. 2021; FedSAGD paper App. C.6).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, grad, local_models, pair0, run_rounds, tiny_run


@pytest.mark.parametrize("v_init", ["tau2", "zeros"])
def test_fedadam_three_rounds(v_init):
    b1, b2, tau, eta = 0.9, 0.99, 0.01, 0.1
    x, m = np.zeros(2), np.zeros(2)
    v = np.full(2, tau ** 2) if v_init == "tau2" else np.zeros(2)
    for _ in range(3):
        ys = local_models(lambda i, y: y - LR * grad(i, y), x)
        delta = np.mean(ys, axis=0) - x
        m = b1 * m + (1 - b1) * delta
        v = b2 * v + (1 - b2) * delta ** 2
        x = x + eta * m / (np.sqrt(v) + tau)
    run = tiny_run("fedadam", {"beta1": b1, "beta2": b2, "tau": tau, "v_init": v_init}, global_lr=eta)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["m"]), m, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["v"]), v, rtol=0, atol=1e-12)

