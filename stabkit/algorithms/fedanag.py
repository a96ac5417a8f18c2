"""FedANAG, "analog" Nesterov (Zhang et al. 2025; FedSAGD paper App. C.10 for the local rule, the authors'
``fed_nesterov`` code for the server rule, which the FedSAGD paper does not state).

State: server v (v_0 = 0), in the gradient direction.

    client: y <- y - eta_l ((1 + beta) g_i(y) + beta^2 v_t)      (= g + beta (beta v_t + g): Nesterov on beta v_t + g)
    server: Delta = mean_i (y_K - x_t)
            v_{t+1} = beta/(1+beta) v_t - Delta / ((1+beta) eta_l K)    (FedSAGD's line 15)
            x_{t+1} = x_t + eta Delta

The server rule is FedSAGD's (Algorithm 1 lines 15-16), the shared rule ``lookahead_server``
(:mod:`stabkit.algorithms.rules`). beta = 0 is FedAvg bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, descend, hp
from stabkit.algorithms.rules import lookahead_server, on_clients


@dataclass(frozen=True)
class FedANAGParams(HParams):
    beta: float = hp(0.9, "momentum coefficient beta (local and server)", low=0.0, high=1.0, high_open=True)


class FedANAG(Algorithm):
    name = "fedanag"
    title = "FedANAG"
    reference = "Zhang et al. 2025 (FedANAG); FedSAGD paper App. C.10, server rule from the authors' code"
    params_cls = FedANAGParams
    server_state = ("v",)

    def client_step(self, ctx, step, y, local, g):
        b = self.p.beta
        return descend(y, step.lr, (1 + b) * g + b ** 2 * on_clients(ctx.server["v"])), local

    def server_update(self, ctx, means):
        return lookahead_server(ctx, means, self.p.beta)
