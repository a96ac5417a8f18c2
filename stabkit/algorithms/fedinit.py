"""FedInit: FedAvg with personalised relaxed initialisation (Sun, Shen & Tao; fedinit.md §1.1-1.3).

    client i in A_t:  w_{i,0} = w^t + beta (w^t - last_i)          (line 6; last_i = w^0 before its first round)
                      K local SGD steps;  last_i <- w_{i,K}         (lines 7-11; stale for clients not sampled)
    server:  model_avg        w^{t+1} = w^t + eta_g mean_i (w_{i,K} - w^t)    (line 16; eta_g = 1: model average)
             delta_from_init  w^{t+1} = w^t + eta_g mean_i (w_{i,K} - w_{i,0})  (reference code, UNCERTAIN F-U1)

It is exactly :class:`~stabkit.algorithms.relaxed_init.RelaxedInit` around FedAvg, exposed as a named
algorithm with its own hyperparameters; beta = 0 is FedAvg bit for bit. The default beta = 0.1 is the
authors' code/README value (F-U13; note it exceeds the theory's beta < 0.084). The run option ``ri_beta``
applies the same RI to any other method (Table 6; §1.3): only the start point moves, the method's other
anchors (e.g. FedProx's prox centre) stay at w^t.
"""
from dataclasses import dataclass
from typing import Optional

from stabkit.algorithms.base import HParams, choice, hp
from stabkit.algorithms.fedavg import FedAvg
from stabkit.algorithms.relaxed_init import AGGREGATIONS, RelaxedInit


@dataclass(frozen=True)
class FedInitParams(HParams):
    beta: float = hp(0.1, "relaxed-initialisation coefficient beta (authors' code default 0.1; "
                     "negative moves the start towards the last local model)")
    aggregation: str = choice("model_avg", "server aggregation (UNCERTAIN F-U1): model_avg = paper line 16 "
                              "(uploads from w^t); delta_from_init = reference code (uploads from the RI point)",
                              AGGREGATIONS)


class FedInit(RelaxedInit):
    name = "fedinit"
    title = "FedInit"
    reference = "Sun, Shen & Tao, FedInit Algorithm 1 (fedinit.md §1.1-1.2)"
    params_cls = FedInitParams
    client_state = ("ri_last",)

    def __init__(self, params: Optional[FedInitParams] = None):
        p = params if params is not None else FedInitParams()
        super().__init__(FedAvg(), p.beta, p.aggregation)
        self.p = p
        cls = type(self)
        self.name, self.title, self.reference = cls.name, cls.title, cls.reference
