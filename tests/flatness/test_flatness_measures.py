"""Scalar sharpness against exact answers: the quadratic task (H known in closed form) and dense Hessians."""
import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.errors import ConfigError
from stabkit.flatness.hessian import hutchinson, lanczos
from stabkit.flatness.measure import measure
from stabkit.flatness.objective import client_objective, training_objective
from stabkit.flatness.settings import SharpnessSettings
from stabkit.flatness.sharpness import average_sharpness, sam_sharpness
from stabkit.run.experiment import PairedRun

DIM, COND = 8, 10.0
EIGS = np.logspace(-1, 0, DIM)  # the quadratic task's Hessian spectrum (stabkit.tasks.quadratic)


def quadratic_run(pairs=1):
    return PairedRun(RunConfig(task="quadratic", dtype="float64", pairs=pairs, rounds=1, perturb="client",
                               task_options=TaskOptions(quad_dim=DIM, quad_condition=COND, clients=4,
                                                        heldout_clients=2, samples_per_client=16)))


def mlp_run():
    return PairedRun(RunConfig(task="synthetic", model="mlp", hidden=4, dtype="float64", pairs=1, rounds=1,
                               batch_size=8, task_options=TaskOptions(dim=5, classes=3, clients=4, heldout_clients=2,
                                                        samples_per_client=12)))


def dense(obj, theta):
    """Gradient and Hessian of objective 0 at theta by torch.autograd.functional (float64)."""
    m = obj.model
    f = lambda th: (m.per_sample_loss(m.forward(th, obj.x), obj.y) * obj.w[0]).sum()
    return torch.autograd.functional.jacobian(f, theta), torch.autograd.functional.hessian(f, theta)


def test_quadratic_spectrum_and_trace_are_exact():
    run = quadratic_run(pairs=2)
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed)
    theta = run.engine.x.reshape(4, -1)
    spec = lanczos(obj.hvp, theta, k=5)
    np.testing.assert_allclose(spec.top, np.tile(EIGS[::-1][:5], (4, 1)), rtol=1e-5)  # float32 data
    np.testing.assert_allclose(spec.smallest, 1 / COND, rtol=1e-5)
    assert spec.converged.all() and (spec.iterations == DIM).all()  # Krylov space exhausted: exact
    tr = hutchinson(obj, theta, probes=60, seed=3)
    assert np.all(np.abs(tr.mean - EIGS.sum()) < 4 * tr.se)
    # Rademacher variance is 2 sum_{i != j} H_ij^2: the reported standard error estimates it
    H = dense(obj, theta[0])[1].numpy()
    se = np.sqrt(2 * ((H ** 2).sum() - (np.diag(H) ** 2).sum()) / 60)
    assert 0.6 * se < tr.se[0] < 1.6 * se


def test_sam_sharpness_solves_the_trust_region_problem_on_the_quadratic():
    run = quadratic_run()
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed).select([0])
    theta = run.engine.x[0, :1]
    g, H = (t.numpy() for t in dense(obj, theta[0]))
    radii = (0.01, 0.1, 1.0)
    got = sam_sharpness(obj, theta, radii, steps=30)[0]
    lam, U = np.linalg.eigh(H)
    gt = U.T @ g
    for r, value in zip(radii, got):
        lo, hi = lam[-1] + 1e-12, lam[-1] + np.linalg.norm(g) / r + 1
        for _ in range(200):  # bisection for mu > lambda_max with ||(mu - H)^-1 g|| = r
            mu = (lo + hi) / 2
            lo, hi = (mu, hi) if np.linalg.norm(gt / (mu - lam)) > r else (lo, mu)
        e = gt / (mu - lam)
        exact = gt @ e + 0.5 * (lam * e ** 2).sum()
        assert value <= exact * (1 + 1e-9)
        assert value >= exact * (1 - 1e-6)


def test_average_direction_sharpness_is_r2_trace_over_2d_on_the_quadratic():
    run = quadratic_run()
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed).select([0])
    theta = run.engine.x[0, :1]
    mean, se = average_sharpness(obj, theta, (0.5,), directions=400, seed=1)
    expected = 0.25 * EIGS.sum() / (2 * DIM)  # E_u[g.u] = 0, E_u[u^T H u] = tr(H) / d
    assert abs(mean[0, 0] - expected) < 4 * se[0, 0]


def test_tiny_mlp_matches_the_dense_hessian():
    run = mlp_run()
    run.step()
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed)
    theta = run.engine.x.reshape(2, -1)
    H = dense(obj, theta[0])[1].numpy()
    exact = np.sort(np.linalg.eigvalsh(H))[::-1]
    v = torch.randn(2, theta.shape[1], dtype=torch.float64)
    np.testing.assert_allclose(obj.hvp(theta, v)[0].numpy(), H @ v[0].numpy(), rtol=1e-10, atol=1e-12)
    s = SharpnessSettings(probes=400, lanczos_tol=1e-6)
    m = measure(obj, theta, s)
    assert m["lanczos_converged"].all() and m["lanczos_residual"].max() <= 1e-6
    np.testing.assert_allclose(m["lambda_max"][0], exact[0], rtol=1e-6)
    np.testing.assert_allclose(m["lambda_5"][0], exact[4], rtol=1e-5)
    assert abs(m["trace"][0] - np.trace(H)) < 4 * m["trace_se"][0]
    # SAM sharpness at a small radius is first order: r ||g|| + O(r^2)
    g = dense(obj, theta[0])[0].numpy()
    r = 0.01
    assert abs(m["sam_0.01"][0] - r * np.linalg.norm(g)) <= 0.5 * r ** 2 * abs(exact).max() + 1e-12
    assert (m["sam_0.01"] <= m["sam_0.05"]).all() and (m["sam_0.05"] <= m["sam_0.1"]).all()


def test_batched_probes_are_each_models_dense_hessian_times_each_probe():
    """Objective.hvp_many: n vectors per model through one shared primal (vmap over the tangents)."""
    run = mlp_run()
    run.step()
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed)
    theta = run.engine.x.reshape(2, -1)
    V = torch.randn(3, 2, theta.shape[1], dtype=torch.float64)
    got = obj.hvp_many(theta, V)
    assert got.shape == V.shape
    for q in range(2):
        H = dense(obj.select([q]), theta[q])[1].numpy()
        np.testing.assert_allclose(got[:, q].numpy(), V[:, q].numpy() @ H.T, rtol=1e-10, atol=1e-12)
    for i in range(3):
        torch.testing.assert_close(got[i], obj.hvp(theta, V[i]), rtol=1e-12, atol=1e-14)


def test_client_objective_is_the_clients_own_loss():
    run = mlp_run()
    obj = client_objective(run.model, run.data, [1, 2])
    theta = run.engine.x[0, :1].expand(2, -1)
    own = [run.model.losses(theta[:1], *run.data.row(i))[0].mean() for i in (1, 2)]
    np.testing.assert_allclose(obj.loss(theta).numpy(), [float(o) for o in own], rtol=1e-12)


@pytest.mark.parametrize("bad", [dict(radii=(0.0,)), dict(radii=(-0.1, 0.1)), dict(probes=-1),
                                 dict(fraction=0.0), dict(top=0)])
def test_bad_settings_are_one_line_errors(bad):
    with pytest.raises(ConfigError, match="invalid"):
        SharpnessSettings(**bad)
