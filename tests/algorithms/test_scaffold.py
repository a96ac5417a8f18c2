"""SCAFFOLD's pinned update rule (option II; FedSAGD paper App. C.3) and the field's known bugs it guards against.

Option II runs on the three-client problem (unequal client sizes, 2 of 3 clients per round), so a client
skips a round, keeps its c_i and uses it when it returns. Expected values: the update rules written out in
plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest
import torch

from tests.helpers import B3, LR, K, grad, grad3, pair0, run3, run_rounds, sampled, tiny_run

N3 = [len(b) for b in B3]


def scaffold_ref(samples, decay, eta, bug=None):
    """SCAFFOLD option II on task3; ``bug`` reproduces one of the mistakes seen in public implementations."""
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
    run = run3("scaffold", {}, rounds, lr_decay=decay, global_lr=eta)
    samples = [sampled(run, t) for t in range(rounds)]
    c_hist = []
    for t in range(rounds):
        before = run.engine.client_state["c_i"][0, 0].clone()
        run.step()
        after = run.engine.client_state["c_i"][0, 0]
        for i in set(range(3)) - set(samples[t]):
            assert torch.equal(before[i], after[i]), f"unsampled client {i} changed in round {t}"
        c_hist.append(pair0(run.engine.server["c"]).copy())
    x, c, ci = scaffold_ref(samples, decay, eta)
    np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["c"]), c, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.client_state["c_i"][0, 0, :len(ci)].numpy(), np.stack(ci), rtol=0, atol=1e-12)
    assert np.abs(c).max() > 0.05 and min(np.abs(v).max() for v in ci) > 0.05  # state really exercised
    # each known bug gives a visibly different trajectory (so the match above excludes it)
    for bug in ("size_K", "upload_c", "sampled_count", "sign"):
        xb, cb, _ = scaffold_ref(samples, decay, eta, bug)
        assert max(np.abs(xb - x).max(), np.abs(cb - c).max()) > 1e-4, bug
    # the corrections really change the local steps: SCAFFOLD is not FedAvg after the first round
    fedavg = run3("fedavg", {}, rounds, lr_decay=decay, global_lr=eta)
    run_rounds(fedavg, rounds)
    assert np.abs(pair0(fedavg.engine.x) - x).max() > 1e-3


@pytest.mark.parametrize("placement", ["direction", "gradient"])
def test_scaffold_option_I_uses_full_gradient_at_x_t(placement):
    """Option I: c_i+ = grad F_i(x_t), two clients, three rounds; the weight decay is in every local step,
    and in c_i+ only under the FedSAGD analysis's ``gradient`` placement."""
    wd = 0.05
    wd_state = wd if placement == "gradient" else 0.0
    x, c, ci = np.zeros(2), np.zeros(2), [np.zeros(2), np.zeros(2)]
    for _ in range(3):
        ds, dcs = [], []
        for i in (0, 1):
            y = x.copy()
            for _ in range(K):
                y = y - LR * (grad(i, y) + wd * y - ci[i] + c)
            c_plus = grad(i, x) + wd_state * x
            ds.append(y - x)
            dcs.append(c_plus - ci[i])
            ci[i] = c_plus
        x = x + np.mean(ds, axis=0)
        c = c + (2 / 2) * np.mean(dcs, axis=0)
    run = tiny_run("scaffold", {"control": "I"}, weight_decay=wd, weight_decay_placement=placement)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["c"]), c, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.client_state["c_i"][0, 0, :len(ci)].numpy(), np.stack(ci), rtol=0, atol=1e-12)

