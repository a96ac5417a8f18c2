"""FedProx's pinned update rule (FedSAGD paper App. C.2).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, grad, local_models, run_rounds, tiny_run


def test_fedprox_two_rounds():
    lam = 0.5
    x = np.zeros(2)
    for _ in range(2):
        ys = local_models(lambda i, y: y - LR * (grad(i, y) + lam * (y - x)), x)
        x = np.mean(ys, axis=0)
    np.testing.assert_allclose(run_rounds(tiny_run("fedprox", {"lam": lam}), 2), x, rtol=0, atol=1e-12)

