"""FedAvg (McMahan et al. 2017; FedSAGD paper App. C.1).

client: y <- y - eta_l g_i(y), K times; upload d_i = y - x_t.   server: x_{t+1} = x_t + eta mean_i d_i.
Exactly the base class's rules; it exists as the named reference every reduction test compares against.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams


@dataclass(frozen=True)
class FedAvgParams(HParams):
    """FedAvg has no hyperparameters beyond the engine's (lrs, K, batch size, weight decay, clipping)."""


class FedAvg(Algorithm):
    name = "fedavg"
    title = "FedAvg"
    reference = "McMahan et al. 2017, AISTATS; FedSAGD paper App. C.1"
    params_cls = FedAvgParams
