"""MimeLite (Karimireddy et al. 2021, "Mime"; FedSAGD paper App. C.8).

State: server momentum m (m_0 = 0).

    client: G_i = grad F_i(x_t)          (full local gradient at x_t; one extra counted gradient per round)
            y <- y - eta_l ((1 - beta) g_i(y) + beta m_t) ; upload d_i = y_K - x_t and G_i
    server: x_{t+1} = x_t + eta mean_i d_i
            m_{t+1} = (1 - beta) mean_i G_i + beta m_t

G_i gets the run's gradient treatment (clipping; weight decay at x_t only under the analysis's
``weight_decay_placement=gradient`` -- the MimeLite code's G_i has none, the default). The reference code
averages one epoch of minibatch gradients at x_t, which with an exact partition of the data is the full
gradient used here. beta defaults to 0.2 (App. A.3; the README's CIFAR-100 run uses 0.9). beta = 0 is
FedAvg bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, descend, hp
from stabkit.algorithms.rules import client_delta, full_gradient_at_x, on_clients, server_step


@dataclass(frozen=True)
class MimeLiteParams(HParams):
    beta: float = hp(0.2, "server momentum coefficient beta (weight of m in the local step)",
                     low=0.0, high=1.0, high_open=True)


class MimeLite(Algorithm):
    name = "mimelite"
    title = "MimeLite"
    reference = "Karimireddy et al. 2021 (Mime), MimeLite; FedSAGD paper App. C.8"
    params_cls = MimeLiteParams
    server_state = ("m",)

    def client_step(self, ctx, step, y, local, g):
        b = self.p.beta
        return descend(y, step.lr, (1 - b) * g + b * on_clients(ctx.server["m"])), local

    def client_final(self, ctx, start, y, local):
        return {"delta": client_delta(ctx, y), "G": full_gradient_at_x(ctx)}, {}

    def server_update(self, ctx, means):
        b = self.p.beta
        m = (1 - b) * means["G"] + b * ctx.server["m"]
        return server_step(ctx, means["delta"]), {"m": m}
