"""FedLESAM's pinned update rule (Fan et al. 2024; a FedSWA-paper baseline), with per-client state on the
three-client problem.

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest
import torch

from tests.helpers import LR, K, fedavg_server, grad, grad3, run3, run_rounds, sampled, tiny_run, unit


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


@pytest.mark.parametrize("first", ["sgd", "x0"])
def test_fedlesam_state_of_unsampled_clients_is_carried(first):
    """Each client keeps the global model of its own last participation; a client that sits out a round
    keeps its theta_old untouched and uses it when it returns (delta spans several rounds).
    First participation: 'sgd' -> eps = 0; 'x0' -> theta_old = x_0 = 0."""
    rho, rounds = 0.4, 6
    run = run3("fedlesam", {"rho": rho, "first": first}, rounds)
    x = np.zeros(2)
    old = {i: (None if first == "sgd" else np.zeros(2)) for i in range(3)}
    returned_after_gap = late_first = False
    last_seen = {}
    for t in range(rounds):
        S = sampled(run, t)
        before = run.engine.client_state["theta_old"].clone()
        run.step()
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
    a = run3("fedlesam", {"rho": 0.4, "first": "sgd"}, 6)
    b = run3("fedlesam", {"rho": 0.4, "first": "x0"}, 6)
    run_rounds(a, 6), run_rounds(b, 6)
    assert not torch.equal(a.engine.x, b.engine.x)

