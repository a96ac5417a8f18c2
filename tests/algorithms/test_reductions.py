"""Known reductions between algorithms, bit for bit on a real paired run (digits MLP, minibatches, client
perturbation, weight decay): one table, one FedAvg reference trajectory.

Each row names the paper statement it checks. Controls (settings that must *not* reduce) follow the table.
"""
import pytest
import torch

from stabkit import RunConfig
from stabkit.run.experiment import PairedRun

REDUCTION_RUN = dict(rounds=6, pairs=2, weight_decay=1e-3, eval_every=3)

REDUCTIONS_TO_FEDAVG = [
    ("fedprox", {"lam": 0.0}),  # FedSAGD paper App. C.2
    ("fedsagd", {"beta": 0.0, "lam": 0.0, "mu": 0.0}),  # FedSAGD paper, Algorithm 1
    ("fedsagd", {"beta": 0.9, "beta_local": 0.0, "lam": 0.0, "mu": 0.0}),
    ("feddyn", {"lam": 0.0, "server": "analysis"}),  # App. C.4
    ("fedlnag", {"beta": 0.0}),  # App. C.5, every form
    ("fedlnag", {"beta": 0.0, "momentum_form": "pytorch_nesterov", "momentum_sync": "average"}),
    ("fedlnag", {"beta": 0.0, "lookahead": "lr_beta", "momentum_sync": "average"}),
    # App. C.6: beta1 = 0, beta2 = 1 freezes v at its init; sqrt(v) + tau is exactly 1
    ("fedadam", {"beta1": 0.0, "beta2": 1.0, "v_init": "zeros", "tau": 1.0}),
    ("fedadam", {"beta1": 0.0, "beta2": 1.0, "v_init": "tau2", "tau": 0.5}),
    ("fedcm", {"alpha": 1.0}),  # App. C.7
    ("mimelite", {"beta": 0.0}),  # App. C.8
    ("fedacg", {"lam": 0.0, "beta_acg": 0.0}),  # App. C.9
    ("fedanag", {"beta": 0.0}),  # App. C.10
    ("fosm", {"beta": 0.0, "nu": 1.0}),  # Libra, Algorithm 1: (ii) with beta = 0, nu = 1 is (i)
    ("fedavgm", {"beta": 0.0}),  # Libra: FedAvgM is FOSM with nu = 1
    ("fosm_ema", {"beta": 0.0}),  # nu = 1 - 0
    ("fedinit", {"beta": 0.0, "aggregation": "model_avg"}),  # FedInit paper: beta = 0 is FedAvg
    ("fedinit", {"beta": 0.0, "aggregation": "delta_from_init"}),
    ("fedswa", {"rho": 1.0, "alpha": 1.0}),  # FedSWA paper: rho = 1, alpha = 1 is FedAvg
    ("fedsam", {"rho": 0.0}),  # SAM with rho = 0 is SGD
    ("fedsam", {"rho": 0.0, "ascent": "processed"}),
    ("fedasam", {"rho": 0.0}),
    ("mofedsam", {"rho": 0.0, "alpha_mo": 1.0}),
    ("fedlesam", {"rho": 0.0}),
    ("fedlesam", {"rho": 0.0, "first": "x0"}),
]


@pytest.fixture(scope="module")
def fedavg_trajectory():
    """FedAvg's global models after each round of the reduction run (computed once for all cases)."""
    ref = PairedRun(RunConfig(algo="fedavg", **REDUCTION_RUN))
    xs = []
    for t in range(REDUCTION_RUN["rounds"]):
        ref.step()
        xs.append(ref.engine.x.clone())
    assert ref.engine.discrepancy().min() > 0
    return xs


@pytest.mark.parametrize("algo,hp", REDUCTIONS_TO_FEDAVG)
def test_reductions_to_fedavg_are_bitwise(algo, hp, fedavg_trajectory):
    other = PairedRun(RunConfig(algo=algo, hp=hp, **REDUCTION_RUN))
    for t, x in enumerate(fedavg_trajectory):
        other.step()
        assert torch.equal(x, other.engine.x), f"differs after round {t}"


def test_scaffold_first_round_is_fedavg_bitwise_then_differs(fedavg_trajectory):
    """SCAFFOLD's corrections are zero at t = 0: its first round is FedAvg's bit for bit; later rounds differ."""
    xs = fedavg_trajectory
    run = PairedRun(RunConfig(algo="scaffold", **REDUCTION_RUN))
    run.step()
    assert torch.equal(xs[0], run.engine.x)
    run.step()
    assert not torch.equal(xs[1], run.engine.x)


@pytest.mark.parametrize("algo,hp", [("fedadam", {"beta1": 0.0, "beta2": 0.0, "tau": 1e-3}),
                                     ("fedcm", {"alpha": 1.0, "server": "gradient"})])
def test_non_reductions_differ(algo, hp, fedavg_trajectory):
    """Controls: FedAdam with beta2 < 1 and FedCM's gradient-unit server are not FedAvg."""
    xs = fedavg_trajectory
    run = PairedRun(RunConfig(algo=algo, hp=hp, **REDUCTION_RUN))
    run.step()
    assert not torch.equal(xs[0], run.engine.x)
