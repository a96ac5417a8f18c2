"""FedYogi (Reddi et al. 2021, ICLR, "Adaptive Federated Optimization", Algorithm 2 with Yogi).

    1  for t = 0, ..., T-1:
    2      each sampled client i: y_{i,0} = x_t
    3          for k = 0, ..., K-1:  y_{i,k+1} = y_{i,k} - eta_l g_i(y_{i,k})         (plain SGD)
    4          upload Delta_i = y_{i,K} - x_t
    5      Delta_t = mean_i Delta_i
    6      m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
    7      v_t = v_{t-1} - (1 - beta2) Delta_t^2 sign(v_{t-1} - Delta_t^2)            (elementwise)
    8      x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)                                 (eta = --global-lr)

m_{-1} = 0 and v_{-1} = tau^2 (the paper asks v_{-1} >= tau^2). Unlike FedAdam's v, Yogi's v moves by at
most (1 - beta2) Delta_t^2 towards Delta_t^2 per round, and stays >= 0.
"""
from dataclasses import dataclass

from stabkit.algorithms import Algorithm, HParams, hp, server_step


@dataclass(frozen=True)
class FedYogiParams(HParams):
    beta1: float = hp(0.9, "first-moment coefficient beta_1", low=0.0, high=1.0, high_open=True)
    beta2: float = hp(0.99, "second-moment coefficient beta_2", low=0.0, high=1.0)
    tau: float = hp(1e-3, "adaptivity floor tau added to sqrt(v)", low=0.0, low_open=True)


class FedYogi(Algorithm):
    name = "fedyogi"
    title = "FedYogi"
    reference = "Reddi et al. 2021, ICLR (Adaptive Federated Optimization), Algorithm 2"
    params_cls = FedYogiParams
    server_state = ("m", "v")  # lines 6-7; the client side (lines 2-4) is FedAvg's

    def init_state(self, x0, num_rows):
        server, client = super().init_state(x0, num_rows)
        server["v"] = server["v"] + self.p.tau ** 2  # v_{-1} = tau^2
        return server, client

    def server_update(self, ctx, means):
        p, delta = self.p, means["delta"]  # line 5
        m = p.beta1 * ctx.server["m"] + (1 - p.beta1) * delta  # line 6
        d2 = delta * delta
        v = ctx.server["v"] - (1 - p.beta2) * d2 * (ctx.server["v"] - d2).sign()  # line 7
        return server_step(ctx, m / (v.sqrt() + p.tau)), {"m": m, "v": v}  # line 8: x_t + eta * direction
