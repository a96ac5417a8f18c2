"""The server-optimizer slot (stabkit.algorithms.server_opt): a transform of the mean upload around any client
rule. SCAFFOLD's clients with an Adam server, pinned against the two rules composed in plain numpy."""
import numpy as np
import pytest

from stabkit.algorithms import Algorithm
from stabkit.algorithms.fedadam import AdamServer
from stabkit.algorithms.fosm import FOSM, FOSMParams, MomentumServer
from stabkit.algorithms.scaffold import Scaffold
from stabkit.errors import ConfigError
from stabkit.testing import assert_null_pair_zero, assert_reduces_to
from tests.helpers import LR, K, grad, local_models, pair0, run_rounds, tiny_run


class ScaffoldAdam(AdamServer):
    name, title, reference = "scaffold_adam", "SCAFFOLD + Adam server", "composition test"
    inner_cls = Scaffold


def test_scaffold_clients_with_an_adam_server_three_rounds():
    b1, b2, tau, eta = 0.9, 0.99, 0.01, 0.1
    x, m, v = np.zeros(2), np.zeros(2), np.full(2, tau ** 2)
    c, ci = np.zeros(2), [np.zeros(2), np.zeros(2)]
    for _ in range(3):
        ys = [local_models(lambda j, y: y - LR * (grad(j, y) - ci[i] + c), x, clients=(i,))[0] for i in (0, 1)]
        c_plus = [ci[i] - c + (x - ys[i]) / (K * LR) for i in (0, 1)]
        c = c + 1.0 * np.mean([c_plus[i] - ci[i] for i in (0, 1)], axis=0)  # s/M = 2/2
        ci = c_plus
        delta = np.mean(ys, axis=0) - x
        m = b1 * m + (1 - b1) * delta
        v = b2 * v + (1 - b2) * delta ** 2
        x = x + eta * m / (np.sqrt(v) + tau)
    run = tiny_run(ScaffoldAdam, {"beta1": b1, "beta2": b2, "tau": tau}, global_lr=eta)
    np.testing.assert_allclose(run_rounds(run, 3), x, rtol=0, atol=1e-12)
    for name, want in (("m", m), ("v", v), ("c", c)):
        np.testing.assert_allclose(pair0(run.engine.server[name]), want, rtol=0, atol=1e-12)
    assert run.algo.server_state == ("c", "m", "v") and run.algo.client_state == ("c_i",)


def test_an_identity_adam_server_is_the_inner_rule_bit_for_bit():
    # beta1 = 0, beta2 = 1 and v_init = zeros, tau = 1: direction = delta / (0 + 1) exactly
    assert_reduces_to(ScaffoldAdam, "scaffold", {"beta1": 0.0, "beta2": 1.0, "v_init": "zeros", "tau": 1.0})
    assert_null_pair_zero(ScaffoldAdam, {"tau": 0.1})


def test_unnamed_compositions_are_named_after_their_parts():
    algo = MomentumServer(Scaffold(), FOSMParams(beta=0.5))
    assert algo.name == "scaffold+momentum" and algo.server_state == ("c", "m")
    assert AdamServer(Scaffold()).name == "scaffold+adam"
    assert isinstance(algo, Algorithm)
    with pytest.raises(ValueError, match="clashes"):
        MomentumServer(FOSM())  # both keep a server state m
    with pytest.raises(ConfigError):
        FOSMParams(beta=2.0)
