"""FedDyn's pinned update rule (fedsagd.md §2.4), on the three-client problem (per-client h_i).

Expected values: the spec's formulas in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from stabkit.errors import ConfigError
from tests.helpers import K, LR, grad3, pair0, run3, run_rounds, sampled, tiny_run


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

