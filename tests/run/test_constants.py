"""The constants' estimators (stabkit.run.constants): batched over snapshots and clients through plain autograd
and the engine's batched gradient, they give the values of the unbatched ``torch.func`` reference — the power
iteration from the same start, the per-sample gradients — for each fast-path model family."""
import pytest
import torch
from torch.func import grad, jvp, vmap

from stabkit.config.taskoptions import TaskOptions
from stabkit.engine.flatmodel import FlatModel
from stabkit.models.registry import build_model
from stabkit.run.constants import POWER_ITERATIONS, POWER_TOL, _client_batches, _power_iterations
from stabkit.tasks import build_task


def _reference_power_iteration(model, theta, x, y, w, seed):
    """One snapshot's power iteration with forward-over-reverse ``torch.func`` HVPs (the earlier estimator)."""
    v = torch.randn(theta.shape, generator=torch.Generator().manual_seed(seed), dtype=theta.dtype)
    v, norm = v / v.norm(), 0.0
    for _ in range(POWER_ITERATIONS):
        hv = jvp(lambda th: grad(model._weighted_loss)(th, x, y, w), (theta,), (v,))[1]
        new = float(hv.norm())
        v = hv / new
        if abs(new - norm) <= POWER_TOL * new:
            return new
        norm = new
    return norm


@pytest.fixture(scope="module")
def digits():
    return build_task("digits", TaskOptions(clients=4, heldout_clients=2))


@pytest.mark.parametrize("name", ["mlp", "logistic", "cnn"])
def test_batched_power_iterations_and_per_sample_gradients_equal_torch_func(digits, name):
    torch.manual_seed(0)
    model = FlatModel(build_model(name, digits), "classification", torch.float64, torch.device("cpu"))
    x = torch.as_tensor(digits.train_x[0][:60], dtype=torch.float64)
    y = torch.as_tensor(digits.train_y[0][:60])
    thetas = model.flatten()[None] + 0.3 * torch.randn(3, model.d, dtype=torch.float64)  # three snapshots
    w = torch.rand(len(x), dtype=torch.float64)
    w = w / w.sum()
    got = _power_iterations(model, thetas, x, y, w[None], POWER_ITERATIONS, [7, 8, 9])
    want = [_reference_power_iteration(model, th, x, y, w, s) for th, s in zip(thetas, [7, 8, 9])]
    assert got == pytest.approx(want, rel=1e-6) and min(want) > 0
    per = model.per_sample_grads(thetas[1], x, y, chunk=25)  # chunks of the engine's batched gradient
    ref = vmap(grad(model._sample_loss), in_dims=(None, 0, 0))(thetas[1], x, y)
    assert torch.allclose(per, ref, rtol=1e-9, atol=1e-12)


def test_clients_are_batched_whole_up_to_the_cap():
    assert _client_batches([3, 4, 2, 9, 1], 7) == [[0, 1], [2], [3], [4]]
    assert _client_batches([5], 1) == [[0]]


def test_every_path_gives_the_hessian_of_the_unnormalised_weighted_loss(digits):
    """``hvps`` is the Hessian of sum_n w[q, n] loss_n, weights as given: the fast path's double backward and
    the generic ``torch.func`` path agree on weights that do not sum to one."""
    torch.manual_seed(1)
    model = FlatModel(build_model("mlp", digits), "classification", torch.float64, torch.device("cpu"))
    x = torch.as_tensor(digits.train_x[0][:40], dtype=torch.float64)
    y = torch.as_tensor(digits.train_y[0][:40])
    theta = model.flatten()[None] + 0.2 * torch.randn(2, model.d, dtype=torch.float64)
    V, w = torch.randn(2, model.d, dtype=torch.float64), 3.0 * torch.rand(2, len(x), dtype=torch.float64)
    fast = model.hvps(theta, V, x, y, w)
    model.fast = None  # the generic path
    assert torch.allclose(model.hvps(theta, V, x, y, w), fast, rtol=1e-9, atol=1e-12)
