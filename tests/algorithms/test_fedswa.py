"""The FedSWA family: FedSWA, FedMoSWA, FedMo (FedSWA paper, Eq. (3), Sections 3.2-3.3, Algorithm 1).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest
import torch

from tests.helpers import LR, SKIPPER, K, grad, grad3, local_sgd, lockstep, pair0, run3, sampled, tiny_run


def swa_lrs(lr, rho):
    """Eq. (3): eta_k = lr [1 - (1 - rho) k / K], k = 0..K-1 (K = 2: lr and lr (1 + rho) / 2)."""
    return [lr * (1 - (1 - rho) * k / K) for k in range(K)]


def test_fedswa_schedule_and_server_alpha():
    """Two rounds: restarted linear decay (with the run's per-round decay) and x + eta_g alpha mean(y - x)."""
    rho, alpha, eta, decay = 0.3, 1.5, 0.8, 0.9
    run = tiny_run("fedswa", {"rho": rho, "alpha": alpha}, global_lr=eta, lr_decay=decay)
    x = np.zeros(2)
    for t in range(2):
        lrs = swa_lrs(LR * decay ** t, rho)
        ys = [local_sgd(lambda y: grad(i, y), x, lrs) for i in (0, 1)]
        x = x + eta * alpha * (np.mean(ys, axis=0) - x)
        run.step()
    np.testing.assert_allclose(lrs, [0.09, 0.09 * 0.65], rtol=0, atol=1e-15)
    np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)


@pytest.mark.parametrize("option,init,denominator", [
    ("II", "zeros", "exact"), ("I", "zeros", "exact"), ("I_same_round", "zeros", "exact"), ("II", "grad", "exact"),
    ("II", "first_upload", "code"), ("I_same_round", "first_upload", "exact")])
def test_fedmoswa_three_rounds_with_a_stale_client(option, init, denominator):
    """Eq. (5) y <- y - eta_k (g - c_i + m); Option II c_i^+ = c_i - m + (x - y_K) / sum_k eta_k, Option I
    c_i^+ = grad F_i(x); upload c_i^+ - m; m <- m + gamma mean_i (c_i^+ - m); x <- x + eta alpha mean(y - x).
    I_same_round: c_i = grad F_i(x) and m <- m + gamma mean(c_i - m) before the local steps, used in them.
    init = grad: at round 0, c_i = grad F_i(x_0) for the sampled clients and m = their mean. The authors' code's
    reading: init = first_upload sets m = mean upload in round 0 (gamma = 1 once), denominator = code
    divides Option II by K eta_l (1 + rho)/2 instead of sum_k eta_k."""
    rho, alpha, gamma, eta, decay = 0.4, 1.5, 0.3, 0.9, 0.95
    run = run3("fedmoswa", {"rho": rho, "alpha": alpha, "gamma": gamma, "option": option, "init": init,
                            "denominator": denominator}, global_lr=eta, lr_decay=decay)
    x, m, c = np.zeros(2), np.zeros(2), {i: np.zeros(2) for i in range(3)}
    for t in range(3):
        S = sampled(run, t)
        lrs = swa_lrs(LR * decay ** t, rho)
        lr_sum = K * LR * decay ** t * (1 + rho) / 2 if denominator == "code" else sum(lrs)
        g_t = 1.0 if init == "first_upload" and t == 0 else gamma
        before = run.engine.client_state["c"][0, 0].clone()
        if t == 2 and option != "I_same_round":  # the returning client uses its c_i from round 0
            assert SKIPPER in S and np.abs(c[SKIPPER]).max() > 1e-3
        if init == "grad" and t == 0:
            for i in S:
                c[i] = grad3(i, x)
            m = np.mean([c[i] for i in S], axis=0)
        if option == "I_same_round":
            for i in S:
                c[i] = grad3(i, x)
            m = m + g_t * np.mean([c[i] - m for i in S], axis=0)
        ys, cps, ups = [], {}, []
        for i in S:
            y = local_sgd(lambda z: grad3(i, z), x, lrs, extra=lambda z: -c[i] + m)
            if option == "II":
                cps[i] = c[i] - m + (x - y) / lr_sum
            else:
                cps[i] = grad3(i, x)
            ups.append(cps[i] - m)
            ys.append(y)
        if option != "I_same_round":
            m = m + g_t * np.mean(ups, axis=0)
        c.update(cps)
        x = x + eta * alpha * (np.mean(ys, axis=0) - x)
        run.step()
        np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), m, rtol=0, atol=1e-12)
        state = run.engine.client_state["c"][0, 0]
        for j in range(3):
            np.testing.assert_allclose(state[j].numpy(), c[j], rtol=0, atol=1e-12)
            if j not in S:
                assert torch.equal(state[j], before[j])
    assert np.abs(m).max() > 1e-3


def test_fedmo_defaults_are_fedmoswa_without_swa():
    from stabkit.algorithms import build_algorithm

    fedmo, full = build_algorithm("fedmo").p, build_algorithm("fedmoswa").p
    assert (fedmo.rho, fedmo.alpha, fedmo.gamma, fedmo.option) == (1.0, 1.0, 0.2, "II")
    assert (full.rho, full.alpha, full.gamma, full.option, full.init) == (0.1, 1.5, 0.2, "II", "zeros")
    assert build_algorithm("fedswa").p.rho == 0.1 and build_algorithm("fedinit").p.beta == 0.1


@pytest.mark.parametrize("algo,hp,ref,ref_hp,ref_kw", [
    ("fedswa", {"rho": 1.0, "alpha": 1.5}, "fedavg", {}, {"global_lr": 1.5}),  # derived: alpha is a server lr
    ("fedmoswa", {"rho": 1.0, "alpha": 1.0}, "fedmo", {}, {}),  # FedSWA paper, ablation (ii): FedMo
])
def test_other_reductions_are_bitwise(algo, hp, ref, ref_hp, ref_kw):
    for t, (ra, rb) in lockstep((algo, hp, {}), (ref, ref_hp, ref_kw)):
        assert torch.equal(ra.engine.x, rb.engine.x), f"differs after round {t}"

