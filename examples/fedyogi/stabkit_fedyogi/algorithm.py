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
from typing import NamedTuple

from stabkit.algorithms import HParams, ServerOpt, Transform, hp


@dataclass(frozen=True)
class FedYogiParams(HParams):
    beta1: float = hp(0.9, "first-moment coefficient beta_1", low=0.0, high=1.0, high_open=True)
    beta2: float = hp(0.99, "second-moment coefficient beta_2", low=0.0, high=1.0)
    tau: float = hp(1e-3, "adaptivity floor tau added to sqrt(v)", low=0.0, low_open=True)


class YogiState(NamedTuple):
    m: object  # [R, 2, d] first moment
    v: object  # [R, 2, d] second moment


def yogi(beta1: float, beta2: float, tau: float) -> Transform:
    """Lines 5-8 as a server transform of the mean upload Delta_t (line 5 is the engine's mean)."""
    def init(x):
        return YogiState(x.new_zeros(x.shape), x.new_zeros(x.shape) + tau ** 2)  # m_{-1} = 0, v_{-1} = tau^2

    def update(delta, s: YogiState):
        m = beta1 * s.m + (1 - beta1) * delta  # line 6
        d2 = delta * delta
        v = s.v - (1 - beta2) * d2 * (s.v - d2).sign()  # line 7
        return m / (v.sqrt() + tau), YogiState(m, v)  # line 8: x_t + eta * direction

    return Transform(init, update)


class FedYogi(ServerOpt):
    """FedAvg's clients (lines 2-4) with the Yogi transform in the server slot; ``ServerOpt``'s
    ``inner=`` puts the same server behind any other client rule."""

    name = "fedyogi"
    title = "FedYogi"
    reference = "Reddi et al. 2021, ICLR (Adaptive Federated Optimization), Algorithm 2"
    params_cls = FedYogiParams
    state = YogiState

    def transform(self):
        return yogi(self.p.beta1, self.p.beta2, self.p.tau)
