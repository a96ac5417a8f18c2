"""Pinned update rules: one or two rounds on a tiny float64 problem against the hand computation.

Every expected value is computed here from the paper's formulas in plain numpy (K = 2 local steps,
full batch, both clients every round, x_0 = 0), independently of the engine.
"""
import numpy as np
import pytest
import torch

from tests.helpers import K, LR, grad, local_models, run_rounds, tiny_run


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


def test_fedprox_two_rounds():
    lam = 0.5
    x = np.zeros(2)
    for _ in range(2):
        ys = local_models(lambda i, y: y - LR * (grad(i, y) + lam * (y - x)), x)
        x = np.mean(ys, axis=0)
    np.testing.assert_allclose(run_rounds(tiny_run("fedprox", {"lam": lam}), 2), x, rtol=0, atol=1e-12)


@pytest.mark.parametrize("beta_local", [None, 0.1])
def test_fedsagd_three_rounds_uses_server_momentum(beta_local):
    """Algorithm 1 lines 9-10 (local) and 15-16 (server); v from rounds 1-2 enters rounds 2-3."""
    beta, lam, mu, eta, decay = 0.9, 0.5, 0.2, 0.8, 0.95
    bl = beta if beta_local is None else beta_local
    x, v = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t

        def step(i, y):
            m = bl * v + grad(i, y)  # line 9
            return y - lr * (m + (lam + mu) * y - lam * x)  # line 10

        ys = local_models(step, x)
        delta = np.mean(ys, axis=0) - x
        v = beta / (1 + beta) * v - delta / ((1 + beta) * lr * K)
        x = x + eta * delta
    run = tiny_run("fedsagd", {"beta": beta, "lam": lam, "mu": mu, "beta_local": beta_local},
                   global_lr=eta, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["v"][0, 0].numpy(), v, rtol=0, atol=1e-12)
    assert np.abs(v).max() > 0.1  # the momentum really was exercised


@pytest.mark.parametrize("algo,hp", [("fedprox", {"lam": 0.0}),
                                     ("fedsagd", {"beta": 0.0, "lam": 0.0, "mu": 0.0}),
                                     ("fedsagd", {"beta": 0.9, "beta_local": 0.0, "lam": 0.0, "mu": 0.0})])
def test_reductions_to_fedavg_are_bitwise(algo, hp):
    """FedProx with lambda=0 and FedSAGD with beta_local=lambda=mu=0 are FedAvg, bit for bit, on a real
    paired run (digits MLP, minibatches, client perturbation, weight decay)."""
    from stabkit import RunConfig
    from stabkit.run.experiment import PairedRun

    common = dict(rounds=6, pairs=2, weight_decay=1e-3, eval_every=3)
    ref = PairedRun(RunConfig(algo="fedavg", **common))
    other = PairedRun(RunConfig(algo=algo, hp=hp, **common))
    for t in range(common["rounds"]):
        ref.engine.step(t)
        other.engine.step(t)
        assert torch.equal(ref.engine.x, other.engine.x), f"differs after round {t}"
    assert ref.engine.discrepancy().min() > 0
