"""FedAvg's pinned update rule (FedSAGD paper App. C.1), with the engine's shared knobs.

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np

from tests.helpers import LR, grad, local_models, run_rounds, tiny_run


def test_fedavg_two_rounds():
    x = np.zeros(2)
    for _ in range(2):
        ys = local_models(lambda i, y: y - LR * grad(i, y), x)
        x = x + 1.0 * (np.mean(ys, axis=0) - x)
    np.testing.assert_allclose(run_rounds(tiny_run("fedavg"), 2), x, rtol=0, atol=1e-12)


def test_fedavg_with_weight_decay_clipping_global_lr_and_decay():
    wd, clip, eta, decay = 0.3, 0.5, 0.7, 0.9
    x = np.zeros(2)
    clipped = lambda g: g * min(1.0, clip / (np.linalg.norm(g) + 1e-6))  # noqa: E731
    for t in range(2):
        lr = LR * decay ** t
        ys = local_models(lambda i, y: y - lr * (clipped(grad(i, y)) + wd * y), x)
        x = x + eta * (np.mean(ys, axis=0) - x)
    run = tiny_run("fedavg", weight_decay=wd, clip=clip, global_lr=eta, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 2), x, rtol=0, atol=1e-12)

