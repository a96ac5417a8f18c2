"""Where the weight decay goes (RunConfig.weight_decay_placement), pinned by hand on the tiny float64 task.

``direction`` (default, the reference codes' torch.optim.SGD(weight_decay=wd)): every local step is
``y - lr (direction + wd y)`` with the algorithm's direction built from the plain loss gradient, and no
algorithm state holds a decay term; ``gradient`` (the FedSAGD analysis's reading): ``wd y`` is added to the
loss gradient before the algorithm scales/mixes it. With wd = 0 the two placements are the same run bit for bit.
"""
import numpy as np
import pytest

from tests.helpers import LR, K, grad, tiny_run, unit

WD = 1e-3
ROUNDS = 2


def hand(direction, server, state0, placement, wd=WD):
    """ROUNDS rounds by hand. ``direction(i, y, g, state)`` is the algorithm's local direction from the loss
    gradient g at y (client i); ``server(x, ys, state)`` -> (x, state). Placement ``direction`` adds wd y to
    the direction; ``gradient`` adds wd y to g (and hands ``server`` the decay to use in its gradients)."""
    x, state = np.zeros(2), state0
    for _ in range(ROUNDS):
        ys = []
        for i in (0, 1):
            y = x.copy()
            for _ in range(K):
                if placement == "direction":
                    y = y - LR * (direction(i, y, grad(i, y), state) + wd * y)
                else:
                    y = y - LR * direction(i, y, grad(i, y) + wd * y, state)
            ys.append(y)
        x, state = server(x, ys, state, wd if placement == "gradient" else 0.0)
    return x, state


def fedcm(alpha):
    def direction(i, y, g, Delta):
        return alpha * g + (1 - alpha) * Delta

    def server(x, ys, Delta, _):
        mean = np.mean(ys, axis=0)
        return mean, (x - mean) / (LR * K)
    return direction, server, np.zeros(2)


def mofedsam(alpha, rho):
    def direction(i, y, g, Delta):  # g_SAM at y + rho a/||a||, a = the loss gradient (decay never in a)
        g_sam = grad(i, y + rho * unit(grad(i, y))) + (g - grad(i, y))  # + wd y under ``gradient``
        return alpha * g_sam + (1 - alpha) * Delta
    return direction, fedcm(alpha)[1], np.zeros(2)


def fedanag(beta):
    def direction(i, y, g, v):
        return (1 + beta) * g + beta ** 2 * v

    def server(x, ys, v, _):
        delta = np.mean(ys, axis=0) - x
        return x + delta, beta / (1 + beta) * v - delta / ((1 + beta) * LR * K)
    return direction, server, np.zeros(2)


def mimelite(beta):
    def direction(i, y, g, m):
        return (1 - beta) * g + beta * m

    def server(x, ys, m, wd_state):  # G_i = grad F_i(x_t), with the decay only under ``gradient``
        G = np.mean([grad(i, x) + wd_state * x for i in (0, 1)], axis=0)
        return np.mean(ys, axis=0), (1 - beta) * G + beta * m
    return direction, server, np.zeros(2)


CASES = {
    "fedcm": ({"alpha": 0.1}, fedcm(0.1), "Delta"),
    "mofedsam": ({"alpha_mo": 0.1, "rho": 0.2}, mofedsam(0.1, 0.2), "Delta"),
    "fedanag": ({"beta": 0.9}, fedanag(0.9), "v"),
    "mimelite": ({"beta": 0.4}, mimelite(0.4), "m"),
}


@pytest.mark.parametrize("algo", list(CASES))
@pytest.mark.parametrize("placement", ["direction", "gradient"])
def test_weight_decay_placement_by_hand(algo, placement):
    hp, (direction, server, state0), name = CASES[algo]
    x, state = hand(direction, server, state0, placement)
    run = tiny_run(algo, hp, weight_decay=WD, weight_decay_placement=placement)
    for t in range(ROUNDS):
        run.step()
    np.testing.assert_allclose(run.engine.x[0, 0].numpy(), x, rtol=0, atol=1e-13)
    np.testing.assert_allclose(run.engine.server[name][0, 0].numpy(), state, rtol=0, atol=1e-12)
    # the two placements differ at wd = 1e-3 (the decay is scaled or carried by the algorithm)
    other = hand(direction, server, state0, "gradient" if placement == "direction" else "direction")[0]
    assert np.abs(other - x).max() > 1e-7


def test_default_placement_is_the_reference_codes():
    assert tiny_run("fedavg").cfg.weight_decay_placement == "direction"


@pytest.mark.parametrize("algo", list(CASES))
def test_placement_is_bitwise_irrelevant_without_weight_decay(algo):
    runs = [tiny_run(algo, CASES[algo][0], weight_decay=0.0, weight_decay_placement=p)
            for p in ("direction", "gradient")]
    for run in runs:
        for t in range(ROUNDS):
            run.step()
    assert np.abs(runs[0].engine.x.numpy()).max() > 0.01
    assert torch_equal(runs[0].engine.x, runs[1].engine.x)
    assert all(torch_equal(runs[0].engine.server[n], runs[1].engine.server[n]) for n in runs[0].engine.server)


def torch_equal(a, b) -> bool:
    return bool((a == b).all())


def test_fedavg_placements_agree_and_bad_placement_is_one_line():
    """FedAvg scales nothing: both placements are y - lr (g + wd y) (to rounding)."""
    from stabkit.errors import ConfigError
    xs = []
    for p in ("direction", "gradient"):
        run = tiny_run("fedavg", weight_decay=0.05, weight_decay_placement=p)
        run.step()
        xs.append(run.engine.x[0, 0].numpy())
    np.testing.assert_allclose(xs[0], xs[1], rtol=0, atol=1e-15)
    with pytest.raises(ConfigError, match="weight_decay_placement.*direction, gradient"):
        tiny_run("fedavg", weight_decay_placement="inside")
