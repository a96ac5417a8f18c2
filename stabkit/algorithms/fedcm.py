"""FedCM, client-level momentum (Xu et al. 2021; FedSAGD paper App. C.7).

State: the server direction Delta_t in gradient units (Delta_0 = 0).

    client: y <- y - eta_l (alpha g_i(y) + (1 - alpha) Delta_t) ; upload d_i = y_K - x_t
    server: Delta_{t+1} = -mean_i d_i / (sum_k eta_l,k)                    (= -mean_i d_i / (eta_l K))
            server=model:    x_{t+1} = x_t + eta mean_i d_i               (eta_g = eta eta_l K; GHBM convention)
            server=gradient: x_{t+1} = x_t - eta Delta_{t+1}              (eta_g = eta in gradient units; the
                                                                          paper's analysis with eta = 1)

The paper's analysis takes the global step in gradient units (``server=gradient``); default ``model`` (a step
of the same size as FedAvg's, so that alpha = 1 is FedAvg bit for bit; the gradient-unit step is 1/(eta_l K)
times larger).
alpha (weight of the fresh gradient) defaults to 0.1 (App. A.3, EMNIST; Xu et al.).
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, choice, descend, hp
from stabkit.algorithms.rules import client_delta, gradient_units, on_clients, server_step


@dataclass(frozen=True)
class FedCMParams(HParams):
    alpha: float = hp(0.1, "weight alpha of the fresh local gradient (1 - alpha on the server direction)",
                      low=0.0, high=1.0, low_open=True)
    server: str = choice("model", "server step: model = x + eta mean d (eta_g = eta eta_l K), gradient = "
                         "x - eta Delta (gradient units, the paper's analysis)",
                         ("model", "gradient"))


class FedCM(Algorithm):
    name = "fedcm"
    title = "FedCM"
    reference = "Xu et al. 2021 (FedCM: Federated Learning with Client-level Momentum); FedSAGD paper App. C.7"
    params_cls = FedCMParams
    server_state = ("Delta",)

    def client_step(self, ctx, step, y, local, g):
        a = self.p.alpha
        return descend(y, step.lr, a * g + (1 - a) * on_clients(ctx.server["Delta"])), local

    def client_final(self, ctx, start, y, local):
        return {"delta": client_delta(ctx, y), "Delta": gradient_units(ctx, ctx.x_clients, y)}, {}

    def server_update(self, ctx, means):
        Delta = means["Delta"]
        if self.p.server == "model":
            return server_step(ctx, means["delta"]), {"Delta": Delta}
        return server_step(ctx, Delta, -1.0), {"Delta": Delta}
