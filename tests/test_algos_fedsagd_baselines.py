"""The FedSAGD paper's baselines (fedsagd.md §2.3-§2.10): SCAFFOLD, FedDyn, FedLNAG, FedAdam, FedCM,
MimeLite, FedACG and FedANAG.

Every expected value is computed here in plain numpy from the spec's formulas, independently of the
engine: least squares F_i(x) = (1/2n_i)||A_i x - b_i||^2, full batch, K = 2 local steps, lr 0.1, x_0 = 0.
Methods with per-client state (SCAFFOLD's c_i, FedDyn's h_i) run on a three-client task with unequal
client sizes (2, 3 and 1 samples) and s = 2 of M = 3 clients per round, so a client skips a round, keeps
its state and uses it when it returns. The reductions to FedAvg are checked bit for bit on a real paired
run (digits MLP, minibatches, client perturbation, weight decay).
"""
import numpy as np
import pytest
import torch

from stabkit import RunConfig
from stabkit.errors import ConfigError
from stabkit.run.experiment import PairedRun
from tests.helpers import K, LR, grad, local_models, run_rounds, tiny_run

ATOL = 1e-12

# Three training clients of sizes 2, 3 and 1 (unequal on purpose), plus two held-out clients.
A3 = [np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[2.0, 0.0], [1.0, 1.0], [0.5, -1.0]]),
      np.array([[1.0, -1.0]])]
B3 = [np.array([1.0, -1.0]), np.array([0.0, 2.0, 1.0]), np.array([3.0])]
N3 = [len(b) for b in B3]


def grad3(i, x):
    return A3[i].T @ (A3[i] @ x - B3[i]) / len(B3[i])


def run3(algo, hp, rounds, **kw):
    """Float64 full-batch run on task3 with s = 2 of M = 3, and the client samples S_t of each round."""
    run = tiny_run(algo, hp, rounds, a=A3, b=B3, **kw)
    samples = [[int(i) for i in run.engine.round_rows(t)[1][0, 0]] for t in range(rounds)]
    # the state-carrying check needs a client that skips a round and comes back later
    assert any(i not in samples[t] and i in samples[u]
               for t in range(rounds) for u in range(t + 1, rounds) for i in range(3)), samples
    return run, samples


def np_(tensor):
    return tensor[0, 0].numpy()


def fedavg_ref(rounds, g=grad, clients=(0, 1)):
    x = np.zeros(2)
    for _ in range(rounds):
        ys = []
        for i in clients:
            y = x.copy()
            for _ in range(K):
                y = y - LR * g(i, y)
            ys.append(y)
        x = np.mean(ys, axis=0)
    return x


# ---------------------------------------------------------------------------------------------- SCAFFOLD

def scaffold_ref(samples, decay, eta, bug=None):
    """SCAFFOLD option II on task3; ``bug`` reproduces one of the field's mistakes (DESIGN.md)."""
    M = 3
    x, c, ci = np.zeros(2), np.zeros(2), [np.zeros(2) for _ in range(M)]
    for t, S in enumerate(samples):
        lr = LR * decay ** t
        ds, dcs, new = [], [], {}
        for i in S:
            y = x.copy()
            for _ in range(K):
                corr = (ci[i] - c) if bug == "sign" else (-ci[i] + c)
                y = y - lr * (grad3(i, y) + corr)
            steps = N3[i] if bug == "size_K" else K  # bug: a step count derived from the client's size
            c_plus = ci[i] - c + (x - y) / (steps * lr)
            ds.append(y - x)
            dcs.append(c_plus if bug == "upload_c" else c_plus - ci[i])
            new[i] = c_plus
        for i, v in new.items():
            ci[i] = v
        x = x + eta * np.mean(ds, axis=0)
        scale = 1.0 if bug == "sampled_count" else len(S) / M  # bug: N = s instead of N = M
        c = c + scale * np.mean(dcs, axis=0)
    return x, c, ci


def test_scaffold_three_rounds_unequal_sizes_partial_participation_and_field_bugs():
    """c_i+ = c_i - c + (x_t - y_K)/(K eta_l) with the round's decayed lr; uploads dc_i; c += (s/M) mean dc_i;
    the unsampled client keeps c_i and uses it when it returns."""
    decay, eta, rounds = 0.9, 0.8, 4
    run, samples = run3("scaffold", {}, rounds, lr_decay=decay, global_lr=eta)
    c_hist = []
    for t in range(rounds):
        before = run.engine.client_state["c_i"][0, 0].clone()
        run.engine.step(t)
        after = run.engine.client_state["c_i"][0, 0]
        for i in set(range(3)) - set(samples[t]):
            assert torch.equal(before[i], after[i]), f"unsampled client {i} changed in round {t}"
        c_hist.append(np_(run.engine.server["c"]).copy())
    x, c, ci = scaffold_ref(samples, decay, eta)
    np.testing.assert_allclose(np_(run.engine.x), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["c"]), c, rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.engine.client_state["c_i"][0, 0, :len(ci)].numpy(), np.stack(ci), rtol=0, atol=ATOL)
    assert np.abs(c).max() > 0.05 and min(np.abs(v).max() for v in ci) > 0.05  # state really exercised
    # each known bug gives a visibly different trajectory (so the match above excludes it)
    for bug in ("size_K", "upload_c", "sampled_count", "sign"):
        xb, cb, _ = scaffold_ref(samples, decay, eta, bug)
        assert max(np.abs(xb - x).max(), np.abs(cb - c).max()) > 1e-4, bug
    # the corrections really change the local steps: SCAFFOLD is not FedAvg after the first round
    fedavg, _ = run3("fedavg", {}, rounds, lr_decay=decay, global_lr=eta)
    run_rounds(fedavg, rounds)
    assert np.abs(np_(fedavg.engine.x) - x).max() > 1e-3


def test_scaffold_option_I_uses_full_gradient_at_x_t():
    """Option I: c_i+ = grad F_i(x_t) (with the run's weight decay), two clients, three rounds."""
    wd = 0.05
    x, c, ci = np.zeros(2), np.zeros(2), [np.zeros(2), np.zeros(2)]
    for _ in range(3):
        ds, dcs = [], []
        for i in (0, 1):
            y = x.copy()
            for _ in range(K):
                y = y - LR * (grad(i, y) + wd * y - ci[i] + c)
            c_plus = grad(i, x) + wd * x
            ds.append(y - x)
            dcs.append(c_plus - ci[i])
            ci[i] = c_plus
        x = x + np.mean(ds, axis=0)
        c = c + (2 / 2) * np.mean(dcs, axis=0)
    run = tiny_run("scaffold", {"control": "I"}, weight_decay=wd)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["c"]), c, rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.engine.client_state["c_i"][0, 0, :len(ci)].numpy(), np.stack(ci), rtol=0, atol=ATOL)


# ---------------------------------------------------------------------------------------------- FedDyn

@pytest.mark.parametrize("server", ["original", "analysis"])
def test_feddyn_three_rounds_h_i_and_server_formula(server):
    """h_i <- h_i - lam (y_K - x_t); h <- h - (lam/M) sum_{S_t} (y_i - x_t);
    x_{t+1} = mean y_i - h/lam (original) or mean y_i (analysis); squared-norm penalty gradient lam (y - x_t)."""
    lam, M, rounds = 0.5, 3, 4
    run, samples = run3("feddyn", {"lam": lam, "server": server}, rounds)
    x, h, hi = np.zeros(2), np.zeros(2), [np.zeros(2) for _ in range(M)]
    for S in samples:
        ys = []
        for i in S:
            y = x.copy()
            for _ in range(K):
                y = y - LR * (grad3(i, y) - hi[i] + lam * (y - x))
            ys.append(y)
            hi[i] = hi[i] - lam * (y - x)
        h = h - (lam / M) * np.sum([y - x for y in ys], axis=0)
        x = np.mean(ys, axis=0) - (h / lam if server == "original" else 0.0)
    np.testing.assert_allclose(run_rounds(run, rounds), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["h"]), h, rtol=0, atol=ATOL)
    np.testing.assert_allclose(run.engine.client_state["h_i"][0, 0, :M].numpy(), np.stack(hi), rtol=0, atol=ATOL)
    assert min(np.abs(v).max() for v in hi) > 0.01 and np.abs(h).max() > 0.01


def test_feddyn_original_server_needs_positive_lambda():
    with pytest.raises(ConfigError, match="lam"):
        tiny_run("feddyn", {"lam": 0.0})


# ---------------------------------------------------------------------------------------------- FedLNAG

@pytest.mark.parametrize("form", ["damped_lookahead", "pytorch_nesterov"])
@pytest.mark.parametrize("sync", ["reset", "average"])
@pytest.mark.parametrize("lookahead", ["beta", "lr_beta"])
def test_fedlnag_three_rounds(form, sync, lookahead):
    beta, decay = 0.6, 0.9
    x, u = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t
        ys, ms = [], []
        for i in (0, 1):
            y, m = x.copy(), (u.copy() if sync == "average" else np.zeros(2))
            for _ in range(K):
                if form == "damped_lookahead":
                    y_look = y - (beta * lr if lookahead == "lr_beta" else beta) * m
                    m = beta * m + (1 - beta) * grad(i, y_look)
                    y = y - lr * m
                else:
                    g = grad(i, y)
                    m = beta * m + g
                    y = y - lr * (g + beta * m)
            ys.append(y)
            ms.append(m)
        x, u = np.mean(ys, axis=0), np.mean(ms, axis=0)
    run = tiny_run("fedlnag", {"beta": beta, "momentum_form": form, "momentum_sync": sync,
                               "lookahead": lookahead}, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=ATOL)
    if sync == "average":
        np.testing.assert_allclose(np_(run.engine.server["u"]), u, rtol=0, atol=ATOL)
    else:
        assert run.algo.server_state == ()


# ---------------------------------------------------------------------------------------------- FedAdam

@pytest.mark.parametrize("v_init", ["tau2", "zeros"])
def test_fedadam_three_rounds(v_init):
    b1, b2, tau, eta = 0.9, 0.99, 0.01, 0.1
    x, m = np.zeros(2), np.zeros(2)
    v = np.full(2, tau ** 2) if v_init == "tau2" else np.zeros(2)
    for _ in range(3):
        ys = local_models(lambda i, y: y - LR * grad(i, y), x)
        delta = np.mean(ys, axis=0) - x
        m = b1 * m + (1 - b1) * delta
        v = b2 * v + (1 - b2) * delta ** 2
        x = x + eta * m / (np.sqrt(v) + tau)
    run = tiny_run("fedadam", {"beta1": b1, "beta2": b2, "tau": tau, "v_init": v_init}, global_lr=eta)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["m"]), m, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["v"]), v, rtol=0, atol=ATOL)


# ---------------------------------------------------------------------------------------------- FedCM

@pytest.mark.parametrize("server", ["model", "gradient"])
def test_fedcm_three_rounds(server):
    """Delta_{t+1} = -mean d / (eta_l K) with the decayed lr; x + eta mean d (model) or x - eta Delta (gradient)."""
    alpha, eta, decay = 0.3, 0.7, 0.9
    x, D = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t
        ds = [y - x for y in local_models(lambda i, y: y - lr * (alpha * grad(i, y) + (1 - alpha) * D), x)]
        D = -np.mean(ds, axis=0) / (lr * K)
        x = x + eta * np.mean(ds, axis=0) if server == "model" else x - eta * D
    run = tiny_run("fedcm", {"alpha": alpha, "server": server}, global_lr=eta, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["Delta"]), D, rtol=0, atol=ATOL)


# ---------------------------------------------------------------------------------------------- MimeLite

def test_mimelite_three_rounds_full_gradient_at_x_t():
    """G_i = grad F_i(x_t) + wd x_t; y <- y - eta_l((1-beta) g + beta m); m <- (1-beta) mean G + beta m."""
    beta, wd = 0.4, 0.05
    x, m = np.zeros(2), np.zeros(2)
    for _ in range(3):
        ys = local_models(lambda i, y: y - LR * ((1 - beta) * (grad(i, y) + wd * y) + beta * m), x)
        Gs = [grad(i, x) + wd * x for i in (0, 1)]
        x = np.mean(ys, axis=0)
        m = (1 - beta) * np.mean(Gs, axis=0) + beta * m
    run = tiny_run("mimelite", {"beta": beta}, weight_decay=wd)
    evals = [run.engine.step(t).grad_evals for t in range(3)]
    np.testing.assert_allclose(np_(run.engine.x), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["m"]), m, rtol=0, atol=ATOL)
    assert evals == [(K + 1) / K] * 3  # K local gradients + one full gradient at x_t per round


# ---------------------------------------------------------------------------------------------- FedACG

def test_fedacg_three_rounds_lookahead_and_penalty():
    lam, b, eta = 0.85, 0.3, 0.9
    x, m = np.zeros(2), np.zeros(2)
    for _ in range(3):
        look = x + lam * m
        ds = [y - look for y in local_models(lambda i, y: y - LR * (grad(i, y) + b * (y - look)), look)]
        m = lam * m + np.mean(ds, axis=0)
        x = x + eta * m
    run = tiny_run("fedacg", {"lam": lam, "beta_acg": b}, global_lr=eta)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["m"]), m, rtol=0, atol=ATOL)
    assert np.abs(m).max() > 0.05


# ---------------------------------------------------------------------------------------------- FedANAG

def test_fedanag_three_rounds():
    beta, decay = 0.9, 0.95
    x, v = np.zeros(2), np.zeros(2)
    for t in range(3):
        lr = LR * decay ** t
        ys = local_models(lambda i, y: y - lr * ((1 + beta) * grad(i, y) + beta ** 2 * v), x)
        delta = np.mean(ys, axis=0) - x
        v = beta / (1 + beta) * v - delta / ((1 + beta) * lr * K)
        x = x + delta
    run = tiny_run("fedanag", {"beta": beta}, lr_decay=decay)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=ATOL)
    np.testing.assert_allclose(np_(run.engine.server["v"]), v, rtol=0, atol=ATOL)
    assert np.abs(v).max() > 0.1


# ---------------------------------------------------------------------------------------------- reductions

COMMON = dict(rounds=3, pairs=2, local_steps=4, weight_decay=1e-3, eval_every=3)
_FEDAVG = {}


def fedavg_trajectory():
    """FedAvg's x after each round of the shared paired digits run (computed once)."""
    if not _FEDAVG:
        ref = PairedRun(RunConfig(algo="fedavg", **COMMON))
        xs = []
        for t in range(COMMON["rounds"]):
            ref.engine.step(t)
            xs.append(ref.engine.x.clone())
        assert ref.engine.discrepancy().min() > 0
        _FEDAVG["xs"] = xs
    return _FEDAVG["xs"]


@pytest.mark.parametrize("algo,hp", [
    ("feddyn", {"lam": 0.0, "server": "analysis"}),
    ("fedlnag", {"beta": 0.0}),
    ("fedlnag", {"beta": 0.0, "momentum_form": "pytorch_nesterov", "momentum_sync": "average"}),
    ("fedlnag", {"beta": 0.0, "lookahead": "lr_beta", "momentum_sync": "average"}),
    ("fedadam", {"beta1": 0.0, "beta2": 1.0, "v_init": "zeros", "tau": 1.0}),
    ("fedadam", {"beta1": 0.0, "beta2": 1.0, "v_init": "tau2", "tau": 0.5}),
    ("fedcm", {"alpha": 1.0}),
    ("mimelite", {"beta": 0.0}),
    ("fedacg", {"lam": 0.0, "beta_acg": 0.0}),
    ("fedanag", {"beta": 0.0}),
])
def test_reductions_to_fedavg_are_bitwise(algo, hp):
    """FedCM alpha=1, MimeLite beta=0, FedACG lam=beta_acg=0, FedANAG beta=0, FedLNAG beta=0 (all forms),
    FedDyn lam=0 (analysis server) and FedAdam's exact limit beta1=0, beta2=1 (v frozen at its init) with a
    denominator sqrt(v)+tau of exactly 1 are FedAvg, bit for bit, on a real paired run."""
    other = PairedRun(RunConfig(algo=algo, hp=hp, **COMMON))
    for t, x in enumerate(fedavg_trajectory()):
        other.engine.step(t)
        assert torch.equal(x, other.engine.x), f"differs after round {t}"


def test_scaffold_first_round_is_fedavg_bitwise_then_differs():
    """SCAFFOLD's corrections are zero at t = 0: its first round is FedAvg's bit for bit; later rounds differ."""
    xs = fedavg_trajectory()
    run = PairedRun(RunConfig(algo="scaffold", **COMMON))
    run.engine.step(0)
    assert torch.equal(xs[0], run.engine.x)
    run.engine.step(1)
    assert not torch.equal(xs[1], run.engine.x)


@pytest.mark.parametrize("algo,hp", [("fedadam", {"beta1": 0.0, "beta2": 0.0, "tau": 1e-3}),
                                     ("fedcm", {"alpha": 1.0, "server": "gradient"})])
def test_non_reductions_differ(algo, hp):
    """Controls: FedAdam with beta2 < 1 and FedCM's gradient-unit server are not FedAvg."""
    xs = fedavg_trajectory()
    run = PairedRun(RunConfig(algo=algo, hp=hp, **COMMON))
    run.engine.step(0)
    assert not torch.equal(xs[0], run.engine.x)
