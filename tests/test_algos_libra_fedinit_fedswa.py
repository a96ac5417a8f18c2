"""Libra's server momentum (fosm, fedavgm, fosm_ema), FedInit (fedinit, RI on fedprox) and the FedSWA family
(fedswa, fedmoswa, fedmo): hand computations on tiny float64 problems and bitwise reductions on real runs.

Hand computations are plain numpy from the specs' formulas (libra.md §1, fedinit.md §1, fedswa.md §1):
K = 2 full-batch local steps, lr = 0.1, x_0 = 0. The 3-client variant samples 2 clients per round; the
seed is chosen so that one client trains in round 0, skips round 1 and returns in round 2, and its state
from round 0 (FedInit's last local model, FedMoSWA's c_i) must be carried untouched and used in round 2.
"""
import numpy as np
import pytest
import torch

from stabkit import RunConfig
from stabkit.run.experiment import PairedRun
from stabkit.engine.sampling import sample_clients
from tests.helpers import LR, A, B, K, grad, tiny_run

# ----------------------------------------------------------------------------------------------------
# a 3-client variant of the tiny least-squares task (2 sampled per round)
A3 = A + [np.array([[1.0, -1.0], [0.5, 2.0]])]
B3 = B + [np.array([2.0, 0.5])]


def grad3(i, x):
    return A3[i].T @ (A3[i] @ x - B3[i]) / len(B3[i])


def _skip_seed():
    """A seed whose samples give a client in round 0, not in round 1, again in round 2."""
    for seed in range(100):
        S = [set(sample_clients(seed, t, 1, 3, 2)[0]) for t in range(3)]
        back = (S[0] - S[1]) & S[2]
        if back:
            return seed, min(back)
    raise AssertionError("no seed found")


SEED, SKIPPER = _skip_seed()


def run3(algo, hp=None, rounds=3, **kw):
    return tiny_run(algo, hp, rounds, a=A3, b=B3, seed=SEED, **kw)


def sampled(run, t):
    return [int(i) for i in run.engine.round_rows(t)[1][0, 0]]


def xnp(run):
    return run.engine.x[0, 0].numpy()


def local_sgd(gfun, y, lrs, extra=lambda y: 0.0):
    """K local steps y <- y - lr_k (gfun(y) + extra(y))."""
    for lr in lrs:
        y = y - lr * (gfun(y) + extra(y))
    return y


# ----------------------------------------------------------------------------------------------------
# Libra: FOSM, FedAvgM, FOSM-EMA (libra.md §1.1-1.3)

def test_fosm_three_rounds_libra_convention():
    """d^t = x^t - mean_i y_i;  m^t = beta m^{t-1} + nu d^t (m^{-1} = 0);  x^{t+1} = x^t - eta_g m^t."""
    beta, nu, eta = 0.7, 0.6, 0.8
    run = tiny_run("fosm", {"beta": beta, "nu": nu}, global_lr=eta)
    x, m = np.zeros(2), np.zeros(2)
    for t in range(3):
        ys = [local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)]
        d = x - np.mean(ys, axis=0)
        m = beta * m + nu * d
        x = x - eta * m
        run.engine.step(t)
        np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), m, rtol=0, atol=1e-12)
    assert np.abs(m).max() > 0.05


def test_fedavgm_agrees_with_fedsagd_spec_sign_convention():
    """fedsagd.md §2.11: m_{t+1} = beta m_t + mean_i (y_i - x_t), x_{t+1} = x_t + eta m_{t+1}; that buffer
    is minus Libra's m (d = -delta), and the models agree."""
    beta, eta = 0.9, 0.5
    run = tiny_run("fedavgm", {"beta": beta}, global_lr=eta)
    x, m_s = np.zeros(2), np.zeros(2)
    for t in range(3):
        ys = [local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)]
        m_s = beta * m_s + np.mean([y - x for y in ys], axis=0)
        x = x + eta * m_s
        run.engine.step(t)
    np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), -m_s, rtol=0, atol=1e-12)


def test_fosm_ema_is_an_ema_of_d():
    """fosm_ema: nu = 1 - beta, so m^t = (1 - beta) sum_tau beta^{t - tau} d^tau (an EMA, m^{-1} = 0)."""
    beta = 0.6
    run = tiny_run("fosm_ema", {"beta": beta})
    x, ds = np.zeros(2), []
    for t in range(3):
        ys = [local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)]
        ds.append(x - np.mean(ys, axis=0))
        m = sum((1 - beta) * beta ** (t - tau) * ds[tau] for tau in range(t + 1))
        x = x - 1.0 * m
        run.engine.step(t)
        np.testing.assert_allclose(run.engine.server["m"][0, 0].numpy(), m, rtol=0, atol=1e-12)
    np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)


def test_fosm_second_order_recursion():
    """libra.md §1.3: x^{t+1} = (1 + beta) x^t - beta x^{t-1} - eta_g nu d^t (constant eta_g), with d^t
    computed by hand from the engine's x^t."""
    beta, nu, eta = 0.5, 0.8, 0.9
    run = tiny_run("fosm", {"beta": beta, "nu": nu}, global_lr=eta)
    xs = [xnp(run).copy()]
    for t in range(4):
        run.engine.step(t)
        xs.append(xnp(run).copy())
    for t in range(1, 4):
        x = xs[t]
        d = x - np.mean([local_sgd(lambda y: grad(i, y), x, [LR] * K) for i in (0, 1)], axis=0)
        np.testing.assert_allclose(xs[t + 1], (1 + beta) * x - beta * xs[t - 1] - eta * nu * d,
                                   rtol=0, atol=1e-12)


def _lockstep(*specs, rounds=4, **common):
    """Step real paired runs (digits MLP, minibatches, client perturbation, weight decay) side by side;
    ``specs`` are ``(algo, hp, extra RunConfig fields)``. K = 3 keeps the test fast."""
    common = dict(rounds=rounds, pairs=2, local_steps=3, weight_decay=1e-3, eval_every=3, **common)
    runs = [PairedRun(RunConfig(algo=a, hp=h, **common, **kw)) for a, h, kw in specs]
    for t in range(rounds):
        for r in runs:
            r.engine.step(t)
        yield t, runs
    assert runs[0].engine.discrepancy().min() > 0  # the perturbation acted


def test_fosm_beta0_is_server_sgd_with_scaled_global_lr():
    """libra.md §1.2 / L-T1: option (ii) with beta = 0 and nu = 0.5 equals option (i) with eta_g <- nu eta_g
    (float64 real run; to 1e-12, the products are associated differently)."""
    nu, eta = 0.5, 0.8
    for t, (ra, rb) in _lockstep(("fosm", {"beta": 0.0, "nu": nu}, dict(global_lr=eta)),
                                 ("fedavg", {}, dict(global_lr=nu * eta)), dtype="float64"):
        assert (ra.engine.x - rb.engine.x).abs().max().item() <= 1e-12, f"differs after round {t}"


REDUCTIONS_TO_FEDAVG = [
    ("fosm", {"beta": 0.0, "nu": 1.0}),  # libra.md §1.2
    ("fedavgm", {"beta": 0.0}),  # libra.md §1.2, fedswa.md §1.6
    ("fosm_ema", {"beta": 0.0}),  # nu = 1 - 0
    ("fedinit", {"beta": 0.0, "aggregation": "model_avg"}),  # fedinit.md F-T1
    ("fedinit", {"beta": 0.0, "aggregation": "delta_from_init"}),
    ("fedswa", {"rho": 1.0, "alpha": 1.0}),  # fedswa.md §1.6
]


def test_reductions_to_fedavg_are_bitwise():
    """The named reductions hold bit for bit on a real paired run (torch.equal after every round)."""
    specs = [("fedavg", {}, {})] + [(a, h, {}) for a, h in REDUCTIONS_TO_FEDAVG]
    for t, (ref, *others) in _lockstep(*specs):
        for (algo, hp), run in zip(REDUCTIONS_TO_FEDAVG, others):
            assert torch.equal(ref.engine.x, run.engine.x), f"{algo} {hp} differs after round {t}"


@pytest.mark.parametrize("algo,hp,ref,ref_hp,ref_kw", [
    ("fedswa", {"rho": 1.0, "alpha": 1.5}, "fedavg", {}, {"global_lr": 1.5}),  # derived, fedswa.md §1.6
    ("fedmoswa", {"rho": 1.0, "alpha": 1.0}, "fedmo", {}, {}),  # fedswa.md §1.5-1.6
])
def test_other_reductions_are_bitwise(algo, hp, ref, ref_hp, ref_kw):
    for t, (ra, rb) in _lockstep((algo, hp, {}), (ref, ref_hp, ref_kw)):
        assert torch.equal(ra.engine.x, rb.engine.x), f"differs after round {t}"


# ----------------------------------------------------------------------------------------------------
# FedInit (fedinit.md §1.1-1.3)

@pytest.mark.parametrize("aggregation", ["model_avg", "delta_from_init"])
def test_fedinit_three_rounds_with_a_stale_client(aggregation):
    """start_i = x + beta (x - last_i) (last_i = x_0 initially, stale while not sampled); K SGD steps;
    last_i <- y_i.  model_avg: x + eta mean(y_i - x); delta_from_init: x + eta mean(y_i - start_i)."""
    beta, eta = 0.3, 0.7
    run = run3("fedinit", {"beta": beta, "aggregation": aggregation}, global_lr=eta)
    x, last = np.zeros(2), {i: np.zeros(2) for i in range(3)}
    for t in range(3):
        S = sampled(run, t)
        before = run.engine.client_state["ri_last"][0, 0].clone()
        if t == 2:  # the returning client starts from its stale round-0 model: a real RI offset
            assert SKIPPER in S and np.abs(beta * (x - last[SKIPPER])).max() > 1e-3
        ups = []
        for i in S:
            start = x + beta * (x - last[i])
            y = local_sgd(lambda z: grad3(i, z), start, [LR] * K)
            ups.append(y - x if aggregation == "model_avg" else y - start)
            last[i] = y
        x = x + eta * np.mean(ups, axis=0)
        run.engine.step(t)
        np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)
        state = run.engine.client_state["ri_last"][0, 0]
        for j in range(3):
            np.testing.assert_allclose(state[j].numpy(), last[j], rtol=0, atol=1e-12)
            if j not in S:
                assert torch.equal(state[j], before[j])


@pytest.mark.parametrize("aggregation", ["model_avg", "delta_from_init"])
def test_ri_run_option_on_fedprox(aggregation):
    """Table 6 wiring (fedinit.md §1.3: only the start point moves): FedProx + RI starts from
    x + beta (x - last_i) and keeps its prox anchor at x_t: y <- y - lr (g(y) + lam (y - x_t))."""
    beta, lam = 0.4, 0.5
    run = tiny_run("fedprox", {"lam": lam}, ri_beta=beta, ri_aggregation=aggregation)
    x, last = np.zeros(2), [np.zeros(2), np.zeros(2)]
    for t in range(2):
        ups = []
        for i in (0, 1):
            start = x + beta * (x - last[i])
            y = local_sgd(lambda z: grad(i, z), start, [LR] * K, extra=lambda z: lam * (z - x))
            ups.append(y - x if aggregation == "model_avg" else y - start)
            last[i] = y
        x = x + np.mean(ups, axis=0)
        run.engine.step(t)
    assert run.algo.name == "fedprox+ri"
    np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------------------
# FedSWA family (fedswa.md §1.2-1.6)

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
        run.engine.step(t)
    np.testing.assert_allclose(lrs, [0.09, 0.09 * 0.65], rtol=0, atol=1e-15)
    np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)


@pytest.mark.parametrize("option,init", [("II", "zeros"), ("I", "zeros"), ("I_same_round", "zeros"),
                                         ("II", "grad")])
def test_fedmoswa_three_rounds_with_a_stale_client(option, init):
    """Eq. (5) y <- y - eta_k (g - c_i + m); Option II c_i^+ = c_i - m + (x - y_K) / sum_k eta_k, Option I
    c_i^+ = grad F_i(x); upload c_i^+ - m; m <- m + gamma mean_i (c_i^+ - m); x <- x + eta alpha mean(y - x).
    I_same_round: c_i = grad F_i(x) and m <- m + gamma mean(c_i - m) before the local steps, used in them.
    init = grad: at round 0, c_i = grad F_i(x_0) for the sampled clients and m = their mean."""
    rho, alpha, gamma, eta, decay = 0.4, 1.5, 0.3, 0.9, 0.95
    run = run3("fedmoswa", {"rho": rho, "alpha": alpha, "gamma": gamma, "option": option, "init": init},
               global_lr=eta, lr_decay=decay)
    x, m, c = np.zeros(2), np.zeros(2), {i: np.zeros(2) for i in range(3)}
    for t in range(3):
        S = sampled(run, t)
        lrs = swa_lrs(LR * decay ** t, rho)
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
            m = m + gamma * np.mean([c[i] - m for i in S], axis=0)
        ys, cps, ups = [], {}, []
        for i in S:
            y = local_sgd(lambda z: grad3(i, z), x, lrs, extra=lambda z: -c[i] + m)
            if option == "II":
                cps[i] = c[i] - m + (x - y) / sum(lrs)
            else:
                cps[i] = grad3(i, x)
            ups.append(cps[i] - m)
            ys.append(y)
        if option != "I_same_round":
            m = m + gamma * np.mean(ups, axis=0)
        c.update(cps)
        x = x + eta * alpha * (np.mean(ys, axis=0) - x)
        run.engine.step(t)
        np.testing.assert_allclose(xnp(run), x, rtol=0, atol=1e-12)
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
