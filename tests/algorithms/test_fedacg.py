"""FedACG's pinned update rule (FedSAGD paper App. C.9).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, grad, local_models, pair0, run_rounds, tiny_run


def test_fedacg_three_rounds_lookahead_and_penalty():
    lam, b, eta = 0.85, 0.3, 0.9
    x, m = np.zeros(2), np.zeros(2)
    for _ in range(3):
        look = x + lam * m
        ds = [y - look for y in local_models(lambda i, y: y - LR * (grad(i, y) + b * (y - look)), look)]
        m = lam * m + np.mean(ds, axis=0)
        x = x + eta * m
    run = tiny_run("fedacg", {"lam": lam, "beta_acg": b}, global_lr=eta)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["m"]), m, rtol=0, atol=1e-12)
    assert np.abs(m).max() > 0.05

