"""FedANAG's pinned update rule (FedSAGD paper App. C.10; server rule from the authors' code).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, K, grad, local_models, pair0, run_rounds, tiny_run


def test_fedanag_three_rounds():
    beta, decay = 0.9, 0.95
    x, v = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t
        ys = local_models(lambda i, y: y - lr * ((1 + beta) * grad(i, y) + beta ** 2 * v), x)
        delta = np.mean(ys, axis=0) - x
        v = beta / (1 + beta) * v - delta / ((1 + beta) * lr * K)
        x = x + delta
    run = tiny_run("fedanag", {"beta": beta}, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["v"]), v, rtol=0, atol=1e-12)
    assert np.abs(v).max() > 0.1

