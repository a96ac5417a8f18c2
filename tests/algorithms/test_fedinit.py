"""FedInit (FedInit paper, Algorithm 1; the authors' code's delta_from_init aggregation) on the three-client
problem: the returning client starts from its stale last local model.

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest
import torch

from tests.helpers import LR, SKIPPER, K, grad3, local_sgd, pair0, run3, sampled


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
        run.step()
        np.testing.assert_allclose(pair0(run.engine.x), x, rtol=0, atol=1e-12)
        state = run.engine.client_state["ri_last"][0, 0]
        for j in range(3):
            np.testing.assert_allclose(state[j].numpy(), last[j], rtol=0, atol=1e-12)
            if j not in S:
                assert torch.equal(state[j], before[j])

