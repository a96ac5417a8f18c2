"""The relaxed-initialisation wrapper as a run option (``ri_beta``; FedInit paper, Table 6).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, K, grad, local_sgd, pair0, tiny_run


@pytest.mark.parametrize("aggregation", ["model_avg", "delta_from_init"])
def test_ri_run_option_on_fedprox(aggregation):
    """Table 6 wiring (FedInit paper: only the start point moves): FedProx + RI starts from
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
        run.step()
    assert run.algo.name == "fedprox+ri"
    np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)

