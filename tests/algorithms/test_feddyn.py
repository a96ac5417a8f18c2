"""FedDyn's pinned update rule (FedSAGD paper App. C.4), on the three-client problem (per-client h_i).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest
import torch

from stabkit.errors import ConfigError
from tests.helpers import LR, K, grad, grad3, local_sgd, pair0, run3, run_rounds, sampled, tiny_run


@pytest.mark.parametrize("server", ["original", "analysis"])
def test_feddyn_three_rounds_h_i_and_server_formula(server):
    """h_i <- h_i - lam (y_K - x_t); h <- h - (lam/M) sum_{S_t} (y_i - x_t);
    x_{t+1} = mean y_i - h/lam (original) or mean y_i (analysis); squared-norm penalty gradient lam (y - x_t)."""
    lam, M, rounds = 0.5, 3, 4
    run = run3("feddyn", {"lam": lam, "server": server}, rounds)
    samples = [sampled(run, t) for t in range(rounds)]
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
    np.testing.assert_allclose(run_rounds(run, rounds), x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair0(run.engine.server["h"]), h, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.engine.client_state["h_i"][0, 0, :M].numpy(), np.stack(hi), rtol=0, atol=1e-12)
    assert min(np.abs(v).max() for v in hi) > 0.01 and np.abs(h).max() > 0.01


def test_feddyn_original_server_needs_positive_lambda():
    with pytest.raises(ConfigError, match="lam"):
        tiny_run("feddyn", {"lam": 0.0})



@pytest.mark.parametrize("anchor,aggregation", [("x_t", "model_avg"), ("start", "model_avg"),
                                                ("start", "delta_from_init")])
def test_feddyn_with_ri_anchor(anchor, aggregation):
    """FedDyn + RI (FedInit paper, Table 6): y <- y - lr (g(y) - h_i + lam (y - a)) with a = x_t (default) or the
    relaxed start y_0 (the FedInit code); h_i <- h_i - lam (y_K - a); h <- h - lam (s/M) mean(y_K - a);
    x <- x + mean(upload) - h/lam, upload y_K - x_t (model_avg) or y_K - y_0 (delta_from_init)."""
    beta, lam = 0.4, 0.5
    run = tiny_run("feddyn", {"lam": lam, "anchor": anchor}, rounds=3, ri_beta=beta, ri_aggregation=aggregation)
    x, h, last, hi = np.zeros(2), np.zeros(2), [np.zeros(2)] * 2, [np.zeros(2)] * 2
    for t in range(3):
        ups, ds = [], []
        for i in (0, 1):
            start = x + beta * (x - last[i])
            a = start if anchor == "start" else x
            y = local_sgd(lambda z: grad(i, z), start, [LR] * K, extra=lambda z: -hi[i] + lam * (z - a))
            ds.append(y - a)
            hi[i] = hi[i] - lam * (y - a)
            ups.append(y - x if aggregation == "model_avg" else y - start)
            last[i] = y
        h = h - lam * (2 / 2) * np.mean(ds, axis=0)
        x = x + np.mean(ups, axis=0) - h / lam
        run.step()
        np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(pair0(run.engine.server["h"]), h, rtol=0, atol=1e-12)
    other = tiny_run("feddyn", {"lam": lam, "anchor": "x_t" if anchor == "start" else "start"}, rounds=3,
                     ri_beta=beta, ri_aggregation=aggregation)
    assert np.abs(run_rounds(other, 3) - x).max() > 1e-4  # the RI offset is real, so the anchor matters


def test_feddyn_anchor_is_bitwise_irrelevant_without_ri():
    runs = [tiny_run("feddyn", {"anchor": a}, rounds=3) for a in ("x_t", "start")]
    for run in runs:
        run_rounds(run, 3)
    assert torch.equal(runs[0].engine.x, runs[1].engine.x)
    assert torch.equal(runs[0].engine.server["h"], runs[1].engine.server["h"])
