"""FedACG, accelerated client gradient (Kim et al., CVPR 2024; FedSAGD paper App. C.9).

State: server momentum m (m_0 = 0). lam is the *server momentum* coefficient (the paper's lambda),
beta_acg the local penalty weight (Kim et al.'s beta; the FedSAGD README's ``--mu 0.01``).

    server broadcasts the lookahead  x~_t = x_t + lam m_t
    client: y <- x~_t ; y <- y - eta_l (g_i(y) + beta_acg (y - x~_t)) ; upload d_i = y_K - x~_t
    server: m_{t+1} = lam m_t + mean_i d_i ;  x_{t+1} = x_t + eta m_{t+1}     (eta = 1: mean_i y_i)

The paper's analysis drops the penalty (beta_acg = 0). lam = beta_acg = 0 is FedAvg bit for bit.
Defaults: lam = 0.9 (the FedSAGD paper's runs; Kim et al.'s code uses 0.85), beta_acg = 0.01.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, descend, hp
from stabkit.algorithms.rules import on_clients, server_step


@dataclass(frozen=True)
class FedACGParams(HParams):
    lam: float = hp(0.9, "server momentum coefficient lambda (lookahead x_t + lambda m_t)",
                    low=0.0, high=1.0, high_open=True)
    beta_acg: float = hp(0.01, "local penalty weight beta (pull towards the lookahead)", low=0.0)


class FedACG(Algorithm):
    name = "fedacg"
    title = "FedACG"
    reference = "Kim, Kim & Han, CVPR 2024 (FedACG); FedSAGD paper App. C.9"
    params_cls = FedACGParams
    server_state = ("m",)
    local_state = ("lookahead",)

    def client_init(self, ctx):
        lookahead = ctx.x_clients + self.p.lam * on_clients(ctx.server["m"])
        return lookahead, {"lookahead": lookahead}

    def client_step(self, ctx, step, y, local, g):
        return descend(y, step.lr, g + self.p.beta_acg * (y - local["lookahead"])), local

    def client_final(self, ctx, start, y, local):
        return {"delta": y - local["lookahead"]}, {}

    def server_update(self, ctx, means):
        m = self.p.lam * ctx.server["m"] + means["delta"]
        return server_step(ctx, m), {"m": m}
