"""FedSAM's pinned update rule (Qu et al. 2022; a FedSWA-paper baseline): SAM around FedAvg's client rule.

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, fedavg_server, grad, local_models, run_rounds, tiny_run, unit


def _fedsam_hand(ascent, rho, wd, clip):
    """Two FedSAM rounds by hand: g = clip(grad(y)) + wd y;  eps = rho a/||a|| with a = clip(grad(y)) (loss)
    or g (processed);  g_SAM = clip(grad(y + eps)) + wd y;  y <- y - lr g_SAM;  FedAvg server."""
    def clipped(v):
        return v * min(1.0, clip / (np.linalg.norm(v) + 1e-6))

    def step(i, y):
        raw = clipped(grad(i, y))
        a = raw if ascent == "loss" else raw + wd * y
        return y - LR * (clipped(grad(i, y + rho * unit(a))) + wd * y)

    x = np.zeros(2)
    for _ in range(2):
        x = fedavg_server(x, local_models(step, x))
    return x


@pytest.mark.parametrize("ascent", ["loss", "processed"])
def test_fedsam_two_rounds_with_weight_decay_and_clipping(ascent):
    rho, wd, clip = 0.3, 0.2, 0.5
    x = _fedsam_hand(ascent, rho, wd, clip)
    spec = dict(weight_decay=wd, clip=clip, weight_decay_placement="gradient")  # decay inside the engine's g
    run = tiny_run("fedsam", {"rho": rho, "ascent": ascent}, **spec)
    np.testing.assert_allclose(run_rounds(run, 2), x, rtol=0, atol=1e-12)
    assert not np.allclose(x, run_rounds(tiny_run("fedavg", **spec), 2), atol=1e-6)
    other = "processed" if ascent == "loss" else "loss"
    run_other = tiny_run("fedsam", {"rho": rho, "ascent": other}, **spec)
    assert not np.allclose(x, run_rounds(run_other, 2), atol=1e-6)  # the ascent choice matters here
    # default placement (decay on the final direction): the engine's g is the clipped loss gradient, so both
    # ascents perturb along it (the "loss" hand computation) and the step is still y - lr (g_SAM + wd y)
    run = tiny_run("fedsam", {"rho": rho, "ascent": ascent}, weight_decay=wd, clip=clip)
    np.testing.assert_allclose(run_rounds(run, 2), _fedsam_hand("loss", rho, wd, clip), rtol=0, atol=1e-12)


def test_fedsam_plain_two_rounds():
    rho = 0.5
    x = np.zeros(2)
    def step(i, y):
        eps = rho * grad(i, y) / np.linalg.norm(grad(i, y))
        return y - LR * grad(i, y + eps)

    for _ in range(2):
        x = fedavg_server(x, local_models(step, x))
    np.testing.assert_allclose(run_rounds(tiny_run("fedsam", {"rho": rho}), 2), x, rtol=0, atol=1e-12)

