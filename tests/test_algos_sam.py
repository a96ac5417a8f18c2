"""Pinned update rules of the SAM baselines of the FedSWA paper (fedswa.md §1.8): FedSAM, FedASAM,
MoFedSAM, FedLESAM.

Every expected value is computed here in plain numpy from the spec's formulas on the tiny least-squares
problem (F_i(x) = ||A_i x - b_i||^2 / (2 n), so the gradient at the perturbed point y + eps is simply
A_i^T (A_i (y + eps) - b_i) / n; K = 2 full-batch steps, lr = 0.1, x_0 = 0), independently of the engine.
"""
import numpy as np
import pytest
import torch

from stabkit import RunConfig
from stabkit.run.experiment import PairedRun
from tests.helpers import K, LR, grad, local_models, run_rounds, tiny_run



def unit(v):
    """v / ||v||, 0 for v = 0 (the guard of stabkit.algorithms.sam)."""
    n = np.linalg.norm(v)
    return v / n if n > 0 else np.zeros_like(v)


def fedavg_server(x, ys, eta=1.0):
    return x + eta * (np.mean(ys, axis=0) - x)


# ---------------------------------------------------------------- FedSAM


@pytest.mark.parametrize("ascent", ["loss", "processed"])
def test_fedsam_two_rounds_with_weight_decay_and_clipping(ascent):
    """g = clip(grad(y)) + wd y;  eps = rho a/||a|| with a = clip(grad(y)) (loss) or g (processed);
    g_SAM = clip(grad(y + eps)) + wd y;  y <- y - lr g_SAM;  FedAvg server."""
    rho, wd, clip = 0.3, 0.2, 0.5

    def clipped(v):
        return v * min(1.0, clip / (np.linalg.norm(v) + 1e-6))

    x = np.zeros(2)
    def step(i, y):
        raw = clipped(grad(i, y))
        a = raw if ascent == "loss" else raw + wd * y
        eps = rho * unit(a)
        return y - LR * (clipped(grad(i, y + eps)) + wd * y)

    for _ in range(2):
        x = fedavg_server(x, local_models(step, x))
    run = tiny_run("fedsam", {"rho": rho, "ascent": ascent}, weight_decay=wd, clip=clip)
    np.testing.assert_allclose(run_rounds(run, 2), x, rtol=0, atol=1e-12)
    assert not np.allclose(x, run_rounds(tiny_run("fedavg", weight_decay=wd, clip=clip), 2), atol=1e-6)
    other = "processed" if ascent == "loss" else "loss"
    run_other = tiny_run("fedsam", {"rho": rho, "ascent": other}, weight_decay=wd, clip=clip)
    assert not np.allclose(x, run_rounds(run_other, 2), atol=1e-6)  # the ascent choice matters here


def test_fedsam_plain_two_rounds():
    rho = 0.5
    x = np.zeros(2)
    def step(i, y):
        eps = rho * grad(i, y) / np.linalg.norm(grad(i, y))
        return y - LR * grad(i, y + eps)

    for _ in range(2):
        x = fedavg_server(x, local_models(step, x))
    np.testing.assert_allclose(run_rounds(tiny_run("fedsam", {"rho": rho}), 2), x, rtol=0, atol=1e-12)


def test_perturbations_are_zero_for_a_zero_direction():
    """The norm guard: a zero gradient (or delta) gives eps = 0, not NaN."""
    from stabkit.algorithms.sam import adaptive_perturbation, l2_perturbation

    a = torch.zeros(1, 2, 3, 4, dtype=torch.float64)
    a[0, 0, 1] = torch.tensor([3.0, 0.0, 4.0, 0.0])
    eps = l2_perturbation(a, 0.5)
    assert torch.equal(eps[0, 1], torch.zeros(3, 4)) and torch.equal(eps[0, 0, 0], torch.zeros(4))
    np.testing.assert_allclose(eps[0, 0, 1].numpy(), [0.3, 0.0, 0.4, 0.0], rtol=0, atol=1e-15)
    eps = adaptive_perturbation(a, torch.ones_like(a), 0.5, 0.01)
    assert torch.isfinite(eps).all() and torch.equal(eps[0, 1], torch.zeros(3, 4))


# ---------------------------------------------------------------- FedASAM


def test_fedasam_two_rounds():
    """T = |y| + eta (element-wise);  eps = rho T^2 g / ||T g||;  y <- y - lr grad(y + eps)."""
    rho, eta, glr = 0.5, 0.1, 0.7

    def step(i, y):
        g = grad(i, y)
        T = np.abs(y) + eta
        eps = rho * T * T * g / np.linalg.norm(T * g)
        return y - LR * grad(i, y + eps)

    x = np.zeros(2)
    for _ in range(2):
        ys = local_models(step, x)
        x = fedavg_server(x, ys, glr)
    run = tiny_run("fedasam", {"rho": rho, "eta_asam": eta}, global_lr=glr)
    np.testing.assert_allclose(run_rounds(run, 2), x, rtol=0, atol=1e-12)


# ---------------------------------------------------------------- MoFedSAM


def test_mofedsam_three_rounds_uses_global_direction():
    """LocalSAM on FedCM: v = alpha g_SAM + (1 - alpha) Delta_t;  y <- y - lr v;  FedAvg server;
    Delta_{t+1} = (1/(s K lr_t)) sum_i (x_t - y_i)  (Delta_0 = 0; used in rounds 2 and 3)."""
    rho, alpha, glr, decay = 0.2, 0.3, 0.8, 0.9
    x, Delta = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t

        def step(i, y):
            eps = rho * unit(grad(i, y))
            return y - lr * (alpha * grad(i, y + eps) + (1 - alpha) * Delta)

        ys = local_models(step, x)
        Delta = sum(x - y for y in ys) / (2 * K * lr)
        x = fedavg_server(x, ys, glr)
    run = tiny_run("mofedsam", {"rho": rho, "alpha_mo": alpha}, global_lr=glr, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["Delta"][0, 0].numpy(), Delta, rtol=0, atol=1e-12)
    assert np.abs(Delta).max() > 0.1


# ---------------------------------------------------------------- FedLESAM


def lesam_client(i, x, theta_old, rho, grad_fn=grad):
    """K steps y <- y - lr grad(y + eps), eps = rho (theta_old - x)/||theta_old - x|| fixed for the round
    (eps = 0 when theta_old is None: first participation, variant 'sgd')."""
    eps = np.zeros_like(x) if theta_old is None else rho * unit(theta_old - x)
    y = x.copy()
    for _ in range(K):
        y = y - LR * grad_fn(i, y + eps)
    return y


def test_fedlesam_three_rounds_both_clients():
    """Round 1: no theta_old -> plain SGD; round 2: theta_old = x_0; round 3: theta_old = x_1."""
    rho = 0.4
    x, old = np.zeros(2), [None, None]
    for _ in range(3):
        ys = [lesam_client(i, x, old[i], rho) for i in (0, 1)]
        old = [x.copy(), x.copy()]
        x = fedavg_server(x, ys)
    run = tiny_run("fedlesam", {"rho": rho})
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    state = run.engine.client_state
    for i in (0, 1):
        np.testing.assert_allclose(state["theta_old"][0, 0, i].numpy(), old[i], rtol=0, atol=1e-12)
        assert (state["seen"][0, 0, i] == 1).all()


# Three training clients (two sampled per round) + two held-out ones, to check per-client state.
A3 = [np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[2.0, 0.0], [1.0, 1.0]]),
      np.array([[1.0, -1.0], [0.5, 2.0]])]
B3 = [np.array([1.0, -1.0]), np.array([0.0, 2.0]), np.array([2.0, 1.0])]


def grad3(i, x):
    return A3[i].T @ (A3[i] @ x - B3[i]) / len(B3[i])


def three_client_run(hp, rounds):
    return tiny_run("fedlesam", hp, rounds, a=A3, b=B3)


@pytest.mark.parametrize("first", ["sgd", "x0"])
def test_fedlesam_state_of_unsampled_clients_is_carried(first):
    """Each client keeps the global model of its own last participation; a client that sits out a round
    keeps its theta_old untouched and uses it when it returns (delta spans several rounds).
    First participation: 'sgd' -> eps = 0; 'x0' -> theta_old = x_0 = 0."""
    rho, rounds = 0.4, 6
    run = three_client_run({"rho": rho, "first": first}, rounds)
    x = np.zeros(2)
    old = {i: (None if first == "sgd" else np.zeros(2)) for i in range(3)}
    returned_after_gap = late_first = False
    last_seen = {}
    for t in range(rounds):
        S = [int(r) for r in run.engine.round_rows(t)[1][0, 0]]
        before = run.engine.client_state["theta_old"].clone()
        run.engine.step(t)
        ys = [lesam_client(i, x, old[i], rho, grad3) for i in S]
        for i in S:
            late_first |= t > 0 and i not in last_seen
            returned_after_gap |= i in last_seen and last_seen[i] < t - 1
            old[i], last_seen[i] = x.copy(), t
        x = fedavg_server(x, ys)
        np.testing.assert_allclose(run.engine.x[0, 0].numpy(), x, rtol=0, atol=1e-12)
        after = run.engine.client_state["theta_old"]
        for i in set(range(3)) - set(S):
            assert torch.equal(after[0, :, i], before[0, :, i]), f"client {i} state changed in round {t}"
    assert returned_after_gap and late_first  # the carried state really was exercised
    for i in range(3):
        if old[i] is not None:
            np.testing.assert_allclose(run.engine.client_state["theta_old"][0, 0, i].numpy(), old[i],
                                       rtol=0, atol=1e-12)


def test_fedlesam_first_participation_variants_differ():
    """A client first sampled after round 0 perturbs along x_0 - x_t only under first='x0'."""
    a = three_client_run({"rho": 0.4, "first": "sgd"}, 6)
    b = three_client_run({"rho": 0.4, "first": "x0"}, 6)
    run_rounds(a, 6), run_rounds(b, 6)
    assert not torch.equal(a.engine.x, b.engine.x)


# ---------------------------------------------------------------- gradient evaluations


@pytest.mark.parametrize("algo,expected", [("fedavg", 1.0), ("fedsam", 2.0), ("fedasam", 2.0),
                                           ("mofedsam", 2.0), ("fedlesam", 1.0)])
def test_gradient_evaluations_per_local_step(algo, expected):
    run = tiny_run(algo)
    assert [run.engine.step(t).grad_evals for t in range(3)] == [expected] * 3
    run = PairedRun(RunConfig(algo=algo, rounds=2, pairs=1, local_steps=3))
    assert [run.engine.step(t).grad_evals for t in range(2)] == [expected] * 2


# ---------------------------------------------------------------- bitwise reductions


REDUCTION_RUN = dict(rounds=6, pairs=2, weight_decay=1e-3, eval_every=3)


@pytest.fixture(scope="module")
def fedavg_trajectory():
    """FedAvg's global models after each round of the reduction run (computed once for all cases)."""
    ref = PairedRun(RunConfig(algo="fedavg", **REDUCTION_RUN))
    xs = []
    for t in range(REDUCTION_RUN["rounds"]):
        ref.engine.step(t)
        xs.append(ref.engine.x.clone())
    assert ref.engine.discrepancy().min() > 0
    return xs


@pytest.mark.parametrize("algo,hp", [("fedsam", {"rho": 0.0}),
                                     ("fedsam", {"rho": 0.0, "ascent": "processed"}),
                                     ("fedasam", {"rho": 0.0}),
                                     ("mofedsam", {"rho": 0.0, "alpha_mo": 1.0}),
                                     ("fedlesam", {"rho": 0.0}),
                                     ("fedlesam", {"rho": 0.0, "first": "x0"})])
def test_reductions_to_fedavg_are_bitwise(algo, hp, fedavg_trajectory):
    """rho = 0 (and alpha_mo = 1 for MoFedSAM) is FedAvg, bit for bit, on a real paired run (digits MLP,
    minibatches, client perturbation, weight decay)."""
    other = PairedRun(RunConfig(algo=algo, hp=hp, **REDUCTION_RUN))
    for t, x in enumerate(fedavg_trajectory):
        other.engine.step(t)
        assert torch.equal(x, other.engine.x), f"differs after round {t}"
