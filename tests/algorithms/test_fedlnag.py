"""FedLNAG's pinned update rules, both momentum forms and synchronisations (FedSAGD paper App. C.5; the authors' code).

Expected values: the update rules written out in plain numpy on the tiny problem of tests/helpers.py.
"""
import numpy as np
import pytest

from tests.helpers import LR, K, grad, pair0, run_rounds, tiny_run


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
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    if sync == "average":
        np.testing.assert_allclose(pair0(run.engine.server["u"]), u, rtol=0, atol=1e-12)
    else:
        assert run.algo.server_state == ()

