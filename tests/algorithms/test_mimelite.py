"""MimeLite's pinned update rule (FedSAGD paper App. C.8).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, K, grad, local_models, pair0, tiny_run


def _step(i, y, beta, m, wd, placement):
    if placement == "gradient":  # the FedSAGD analysis's reading: decay inside g, scaled by 1 - beta
        return y - LR * ((1 - beta) * (grad(i, y) + wd * y) + beta * m)
    return y - LR * ((1 - beta) * grad(i, y) + beta * m + wd * y)  # reference code: on the final direction


@pytest.mark.parametrize("placement", ["direction", "gradient"])
def test_mimelite_three_rounds_full_gradient_at_x_t(placement):
    """G_i = grad F_i(x_t) (+ wd x_t only under the FedSAGD analysis's ``gradient`` placement; the MimeLite
    code's G_i has no decay); y <- y - eta_l((1-beta) g + beta m) + decay; m <- (1-beta) mean G + beta m."""
    beta, wd = 0.4, 0.05
    wd_state = wd if placement == "gradient" else 0.0
    x, m = np.zeros(2), np.zeros(2)
    for _ in range(3):
        ys = local_models(lambda i, y: _step(i, y, beta, m, wd, placement), x)
        Gs = [grad(i, x) + wd_state * x for i in (0, 1)]
        x = np.mean(ys, axis=0)
        m = (1 - beta) * np.mean(Gs, axis=0) + beta * m
    run = tiny_run("mimelite", {"beta": beta}, weight_decay=wd, weight_decay_placement=placement)
    evals = [run.step().grad_evals for t in range(3)]
    np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["m"]), m, rtol=0, atol=1e-12)
    assert evals == [(K + 1) / K] * 3  # K local gradients + one full gradient at x_t per round

