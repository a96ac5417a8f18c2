"""The composition interface (stabkit.algorithms.base.Wrapper) and the engine's local-state contract.

SAM around FedProx (a rule no registered algorithm wraps) is checked against the hand computation on the
tiny problem of tests/helpers.py: y <- y - lr (grad(y + eps) + lam (y - x_t)), eps = rho grad(y)/||grad(y)||.
"""
import numpy as np
import pytest

from stabkit.algorithms import SAM, Algorithm, RelaxedInit, RIParams, SAMParams, build_algorithm
from tests.helpers import LR, fedavg_server, grad, local_models, run_rounds, tiny_run, unit


def test_sam_wraps_any_client_rule():
    rho, lam = 0.3, 0.5
    x = np.zeros(2)
    for _ in range(2):
        ys = local_models(lambda i, y: y - LR * (grad(i, y + rho * unit(grad(i, y))) + lam * (y - x)), x)
        x = fedavg_server(x, ys)
    run = tiny_run("fedprox", {"lam": lam})
    run.engine.algo = SAM(run.algo, SAMParams(rho=rho))
    assert run.engine.algo.name == "fedprox+sam" and run.engine.algo.title == "FedProx + SAM"
    np.testing.assert_allclose(run_rounds(run, 2), x, rtol=0, atol=1e-12)
    assert [run.step().grad_evals for t in (2, 3)] == [2.0, 2.0]


def test_wrapper_state_is_the_inner_state_plus_its_own_and_clashes_are_refused():
    wrapped = RelaxedInit(build_algorithm("scaffold"), RIParams(beta=0.2))
    assert (wrapped.server_state, wrapped.client_state) == (("c",), ("c_i", "ri_last"))
    assert build_algorithm("mofedsam").server_state == ("Delta",)  # FedCM's, inside the SAM wrapper
    with pytest.raises(ValueError, match="ri_last"):
        RelaxedInit(build_algorithm("fedinit"), RIParams(beta=0.2))


def test_engine_refuses_undeclared_local_state():
    class Leaky(Algorithm):
        name, title, reference = "leaky", "Leaky", "-"

        def client_init(self, ctx):
            y, _ = super().client_init(ctx)
            return y, {"m": y}  # not declared in local_state

    run = tiny_run("fedavg")
    run.engine.algo = Leaky()
    with pytest.raises(TypeError, match="leaky.*local state"):
        run.step()


def test_engine_checks_server_and_client_state_as_it_checks_local_state():
    """One rule for the three kinds: a misspelt server or client name is an error, not a stale value kept."""
    from stabkit.algorithms.rules import server_step

    class Misspelt(Algorithm):
        name, title, reference = "misspelt", "Misspelt", "-"
        server_state, client_state = ("m",), ("c",)

        def client_final(self, ctx, start, y, local):
            uploads, _ = super().client_final(ctx, start, y, local)
            return uploads, {"c": y}

        def server_update(self, ctx, means):
            return server_step(ctx, means["delta"]), {"mm": ctx.x}  # "m" misspelt

    class Forgetful(Misspelt):
        name = "forgetful"

        def client_final(self, ctx, start, y, local):
            uploads, _ = super().client_final(ctx, start, y, local)
            return uploads, {}  # "c" not returned

    for algo, message in ((Misspelt(), r"misspelt: server state \['mm'\] differs from its declared server_state "
                                       r"\['m'\]"),
                          (Forgetful(), r"forgetful: client state \[\] differs from its declared client_state "
                                        r"\['c'\]")):
        run = tiny_run("fedavg")
        run.engine.algo = algo
        run.engine.server, run.engine.client_state = algo.init_state(run.engine.x, run.data.num_rows)
        with pytest.raises(TypeError, match=message):
            run.step()


def test_conditional_state_is_declared_at_class_level():
    from stabkit.algorithms import Given, algorithm_class

    for algo, kind, hp, names in (("fedlnag", "server_state", {"momentum_sync": "average"}, ("u",)),
                                  ("fedlnag", "server_state", {}, ()),
                                  ("feddyn", "local_state", {"anchor": "start"}, ("anchor",)),
                                  ("feddyn", "local_state", {}, ()),
                                  ("fedmoswa", "local_state", {"option": "I_same_round"}, ("c", "m", "c_up")),
                                  ("fedmoswa", "local_state", {}, ("c", "m"))):
        assert isinstance(vars(algorithm_class(algo))[kind], Given)
        assert getattr(build_algorithm(algo, hp), kind) == names, (algo, hp)
