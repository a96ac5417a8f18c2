"""Task builders: shapes, counts, determinism, exact quadratic constants, npz format errors."""
import math

import numpy as np
import pytest
import torch

from stabkit.errors import ConfigError
from stabkit.tasks import TASKS, TaskOptions, build_task


def _all_arrays(task):
    return task.train_x + task.train_y + task.val_x + task.val_y + [task.test_x, task.test_y]


def _same(a, b):
    return all(np.array_equal(u, v) for u, v in zip(_all_arrays(a), _all_arrays(b)))


def test_registry_and_unknown_name():
    assert TASKS[:4] == ("digits", "synthetic", "quadratic", "npz") and "cifar10" in TASKS
    with pytest.raises(ConfigError, match="'mnist9'.*digits, synthetic, quadratic, npz"):
        build_task("mnist9", TaskOptions())


@pytest.mark.parametrize("kwargs, field", [
    (dict(heldout_clients=1), "heldout_clients"), (dict(clients=0), "clients"),
    (dict(partition="pathological"), "partition"), (dict(val_fraction=1.0), "val_fraction"),
    (dict(dirichlet_alpha=-1.0), "dirichlet_alpha"), (dict(quad_condition=0.5), "quad_condition"),
])
def test_options_validation(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        TaskOptions(**kwargs)


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "shards"])
def test_digits_counts_and_determinism(scheme):
    opts = TaskOptions(clients=20, heldout_clients=6, partition=scheme, seed=3)
    task = build_task("digits", opts)
    assert task.num_clients == 26 and task.num_train_clients == 20
    assert task.input_shape == (1, 8, 8) and task.train_x[0].shape[1:] == (1, 8, 8)
    assert task.train_x[0].dtype == np.float32 and task.train_x[0].max() <= 1.0
    per_client = 1500 // 26 if scheme != "shards" else 2 * (1500 // 52)
    assert all(len(x) + len(v) == per_client for x, v in zip(task.train_x, task.val_x))
    assert all(len(v) == round(0.2 * per_client) for v in task.val_x)
    total = sum(len(y) for y in task.train_y + task.val_y) + len(task.test_y)
    assert len(task.test_y) == 297 and total == 297 + 26 * per_client
    assert _same(task, build_task("digits", opts))
    assert not _same(task, build_task("digits", TaskOptions(partition=scheme, seed=4)))


def test_synthetic_shapes_and_determinism():
    opts = TaskOptions(clients=5, heldout_clients=3, dim=20, classes=4, samples_per_client=50)
    task = build_task("synthetic", opts)
    assert task.num_clients == 8 and task.input_shape == (20,) and task.num_classes == 4
    assert all(x.shape == (50, 20) and y.shape == (50,) for x, y in zip(task.train_x, task.train_y))
    assert all(v.shape == (10, 20) for v in task.val_x)
    assert task.test_x.shape == (5 * 10, 20) and task.test_y.dtype == np.int64
    assert task.train_y[0].min() >= 0 and task.train_y[0].max() < 4
    assert _same(task, build_task("synthetic", opts))


def _client_grad(x_np, a, b):
    """Autograd gradient of F_i(x) = ||A x - b||^2 / (2n) from the stored arrays."""
    x = torch.tensor(x_np, dtype=torch.float64, requires_grad=True)
    a, b = torch.from_numpy(a).double(), torch.from_numpy(b).double()
    ((a @ x - b) ** 2).sum().div(2 * len(b)).backward()
    return x.grad.numpy()


def test_quadratic_constants_are_exact():
    opts = TaskOptions(clients=8, heldout_clients=2, quad_dim=6, quad_condition=20.0,
                       samples_per_client=30, quad_heterogeneity=2.0, seed=5)
    task = build_task("quadratic", opts)
    c = task.constants
    m = task.num_train_clients
    train = list(zip(task.train_x[:m], task.train_y[:m]))
    # Hessian A^T A / n, shared by clients, with extreme eigenvalues L and mu.
    hessians = [a.astype(np.float64).T @ a / len(a) for a, _ in train]
    hess = hessians[0]
    assert all(np.allclose(h, hess, atol=1e-5) for h in hessians)
    eigs = np.linalg.eigvalsh(hess)
    assert eigs.max() == pytest.approx(c["L"], rel=1e-5) and eigs.min() == pytest.approx(c["mu"], rel=1e-5)
    # grad F_i(x) = H (x - x_i*) is affine with slope H, so x_i* = x - H^{-1} grad F_i(x) is the same at any x.
    rng = np.random.default_rng(0)
    x1, x2 = rng.standard_normal(6), rng.standard_normal(6)
    g1 = np.stack([_client_grad(x1, a, b) for a, b in train])
    g2 = np.stack([_client_grad(x2, a, b) for a, b in train])
    np.testing.assert_allclose(g1 - g2, np.tile(hess @ (x1 - x2), (m, 1)), atol=1e-4)
    # The mean client gradient vanishes at x_star, and f(x_star) = f_star.
    x_star = np.array(c["x_star"])
    g_star = np.stack([_client_grad(x_star, a, b) for a, b in train])
    np.testing.assert_allclose(g_star.mean(axis=0), 0.0, atol=1e-4)
    f_star = np.mean([np.sum((a.astype(np.float64) @ x_star - b) ** 2) / (2 * len(b)) for a, b in train])
    assert f_star == pytest.approx(c["f_star"], rel=1e-6)
    # sigma_g2 = max_i ||grad F_i(x) - grad f(x)||^2, at any x.
    for g in (g1, g2, g_star):
        assert np.max(np.sum((g - g.mean(axis=0)) ** 2, axis=1)) == pytest.approx(c["sigma_g2"], rel=1e-3)
    assert task.kind == "regression" and task.num_classes == 0 and task.train_y[0].dtype == np.float32
    assert len(task.test_y) == m * max(6, math.ceil(0.2 * 30))


def test_quadratic_needs_enough_samples():
    with pytest.raises(ConfigError, match="samples_per_client"):
        build_task("quadratic", TaskOptions(quad_dim=20, samples_per_client=10))


def _write(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


def _dataset(num_ids=7, per=10, y_dtype=np.int64):
    rng = np.random.default_rng(0)
    n = num_ids * per
    return dict(x=rng.standard_normal((n, 3, 2)), y=rng.integers(0, 4, n).astype(y_dtype),
                client=np.repeat(np.arange(100, 100 + num_ids), per))


def test_npz_round_trip(tmp_path):
    data = _dataset()
    path = _write(tmp_path / "data.npz", **data)
    task = build_task("npz", TaskOptions(clients=3, heldout_clients=2, npz_path=path))
    assert task.kind == "classification" and task.num_classes == int(data["y"].max()) + 1
    assert task.input_shape == (3, 2) and task.num_clients == 5 and task.default_model == "mlp"
    # training clients are ids 100..102, held out the last two ids 105, 106
    for k, cid in enumerate([100, 101, 102, 105, 106]):
        own = data["x"][data["client"] == cid].astype(np.float32)
        got = np.concatenate([task.train_x[k], task.val_x[k]]
                             + ([task.test_x[2 * k:2 * k + 2]] if k < 3 else []))
        assert sorted(map(tuple, own.reshape(10, -1))) == sorted(map(tuple, got.reshape(len(got), -1)))
    assert [len(x) for x in task.train_x] == [6, 6, 6, 8, 8] and len(task.test_x) == 6
    # explicit test split, float labels -> regression
    reg = _dataset(y_dtype=np.float64)
    path = _write(tmp_path / "reg.npz", **reg, x_test=np.zeros((4, 3, 2)), y_test=np.ones(4))
    task = build_task("npz", TaskOptions(clients=3, heldout_clients=2, npz_path=path))
    assert task.kind == "regression" and task.default_model == "linear" and task.test_x.shape == (4, 3, 2)
    assert [len(x) for x in task.train_x] == [8] * 5


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.pop("client"), "lacks array 'client'"),
    (lambda d: d.update(y=d["y"][:-1]), "mismatched lengths"),
    (lambda d: d.update(x=d["x"].reshape(-1)[:70]), "ndim"),
    (lambda d: d.update(client=d["client"].astype(float)), "client ids"),
    (lambda d: d.update(x_test=np.zeros((2, 3, 2))), "x_test"),
])
def test_npz_malformed(tmp_path, mutate, needle):
    data = _dataset()
    mutate(data)
    path = _write(tmp_path / "bad.npz", **data)
    with pytest.raises(ConfigError, match=needle) as err:
        build_task("npz", TaskOptions(clients=3, heldout_clients=2, npz_path=path))
    assert "bad.npz" in str(err.value) and "\n" not in str(err.value)


def test_npz_missing_unreadable_and_too_few_clients(tmp_path):
    opts = dict(clients=3, heldout_clients=2)
    with pytest.raises(ConfigError, match="nothere.npz does not exist"):
        build_task("npz", TaskOptions(npz_path=str(tmp_path / "nothere.npz"), **opts))
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip file")
    with pytest.raises(ConfigError, match="garbage.npz cannot be read"):
        build_task("npz", TaskOptions(npz_path=str(garbage), **opts))
    path = _write(tmp_path / "few.npz", **_dataset(num_ids=4))
    with pytest.raises(ConfigError, match="few.npz has 4 distinct client ids"):
        build_task("npz", TaskOptions(npz_path=path, **opts))
    with pytest.raises(ConfigError, match="npz_path"):
        build_task("npz", TaskOptions(**opts))
