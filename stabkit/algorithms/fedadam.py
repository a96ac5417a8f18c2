"""FedAdam (Reddi et al. 2021; FedSAGD paper App. C.6, local = SGD).

    client: FedAvg client; upload d_i = y_K - x_t
    server: Delta_t = mean_i d_i
            m_t = beta1 m_{t-1} + (1 - beta1) Delta_t
            v_t = beta2 v_{t-1} + (1 - beta2) Delta_t^2                 (elementwise; no bias correction)
            x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau)                 (eta = the run's --global-lr)

The paper leaves beta2, tau and the v init unspecified: beta2 = 0.99 and tau = 1e-3 (Reddi et al.); ``v_init``
``tau2`` (default: v_{-1} = tau^2, Reddi et al.'s v_{-1} >= tau^2 and FedACG's code) or ``zeros``.
The paper's experiments use eta = 0.1 (pass --global-lr 0.1); m_{-1} = 0.
FedAvg's clients with the Adam transform in the server slot (:mod:`stabkit.algorithms.server_opt`); the same
server around any client rule is ``AdamServer(inner)``. No setting with beta2 < 1 is FedAvg; the exact limits:
beta1 = 0, beta2 = 1 freezes v at its init, so
(v_init = zeros, tau = 1) and (v_init = tau2, tau = 1/2) divide by exactly 1 -- FedAvg bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import HParams, choice, hp
from stabkit.algorithms.server_opt import AdamState, ServerOpt, adam


@dataclass(frozen=True)
class FedAdamParams(HParams):
    beta1: float = hp(0.9, "first-moment coefficient beta_1", low=0.0, high=1.0, high_open=True)
    beta2: float = hp(0.99, "second-moment coefficient beta_2 (1 freezes v at its init)", low=0.0, high=1.0)
    tau: float = hp(1e-3, "adaptivity floor tau added to sqrt(v)", low=0.0, low_open=True)
    v_init: str = choice("tau2", "initial second moment: tau2 = tau^2 (Reddi et al., FedACG code), zeros",
                         ("tau2", "zeros"))


class AdamServer(ServerOpt):
    """Any algorithm with the Adam server (:func:`~stabkit.algorithms.server_opt.adam`), named ``<inner>+adam``."""

    params_cls = FedAdamParams
    state = AdamState
    tag, tag_title = "adam", "Adam server"

    def transform(self):
        p = self.p
        return adam(p.beta1, p.beta2, p.tau, p.v_init)


class FedAdam(AdamServer):
    name = "fedadam"
    title = "FedAdam"
    reference = "Reddi et al. 2021, ICLR (Adaptive Federated Optimization); FedSAGD paper App. C.6"
