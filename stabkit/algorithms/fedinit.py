"""FedInit: FedAvg with personalised relaxed initialisation (Sun, Shen & Tao; FedInit paper, Algorithm 1).

    client i in A_t:  w_{i,0} = w^t + beta (w^t - last_i)          (line 6; last_i = w^0 before its first round)
                      K local SGD steps;  last_i <- w_{i,K}         (lines 7-11; stale for clients not sampled)
    server:  model_avg        w^{t+1} = w^t + eta_g mean_i (w_{i,K} - w^t)    (line 16; eta_g = 1: model average)
             delta_from_init  w^{t+1} = w^t + eta_g mean_i (w_{i,K} - w_{i,0})  (reference code)

It is exactly the :class:`~stabkit.algorithms.relaxed_init.RelaxedInit` wrapper around FedAvg, exposed as a
named algorithm with RI's hyperparameters; beta = 0 is FedAvg bit for bit. The default beta = 0.1 is the
authors' code/README value (it exceeds the theory's beta < 0.084, docs/errata.md). The run option ``ri_beta``
applies the same RI to any other method (FedInit paper, Table 6): only the start point moves, the method's other
anchors (e.g. FedProx's prox centre) stay at w^t.
"""
from stabkit.algorithms.fedavg import FedAvg
from stabkit.algorithms.relaxed_init import RelaxedInit, RIParams


class FedInit(RelaxedInit):
    name = "fedinit"
    title = "FedInit"
    reference = "Sun, Shen & Tao, FedInit Algorithm 1"
    inner_cls = FedAvg
    params_cls = RIParams

