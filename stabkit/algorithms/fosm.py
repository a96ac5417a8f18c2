"""Server momentum: Libra's Algorithm 1 option (ii), FOSM, and its named special cases (Libra, Algorithm 1).

Clients run plain local SGD (FedAvg's client) and report the pseudo-gradient in Libra's sign convention,
``d^t = mean_i (x^t - x_i^{t,K}) = -mean_i delta_i``. The server keeps one momentum buffer ``m``:

    m^t     = beta m^{t-1} + nu d^t          (m^{-1} = 0, as Libra's App. D assumes: the first m is nu d^0)
    x^{t+1} = x^t - eta_g m^t                (eta_g = the run's global lr)

FedAvg's clients with the :func:`~stabkit.algorithms.server_opt.momentum` transform in the server slot (any
client rule takes it as ``MomentumServer(inner, FOSMParams(...))``, named ``<inner>+momentum``). Special cases,
one class each, sharing this machinery (only ``nu`` differs):

* ``fosm``      beta, nu free.   beta = 0, nu = 1 is FedAvg / server SGD bit for bit; beta = 0, any nu is
  server SGD with global lr ``nu * eta_g``.
* ``fedavgm``   nu = 1 (Hsu et al. 2019). The FedSAGD authors' code (``fedavgm``) writes it with the opposite sign of d:
  ``m_{t+1} = beta m_t + mean_i delta_i``, ``x_{t+1} = x_t + eta m_{t+1}``; that buffer is exactly
  ``-m`` here, so the two agree (tested). beta = 0 is FedAvg bit for bit.
* ``fosm_ema``  nu = 1 - beta: an exponential moving average of d, Libra's "fundamental form of FedCM"
  (distinct from the client-level FedCM of Xu et al.).

Second-order form (as in Libra's proofs): ``x^{t+1} = (1 + beta) x^t - beta x^{t-1} - eta_g nu d^t`` (constant eta_g).
The server state ``m`` (Libra's sign) is logged by the engine as ``disc_m`` / ``norm_m_a`` / ``norm_m_b``.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import HParams, hp
from stabkit.algorithms.server_opt import MomentumState, ServerOpt, momentum

_BETA_DOC = "server momentum coefficient beta"


@dataclass(frozen=True)
class FOSMParams(HParams):
    beta: float = hp(0.9, _BETA_DOC, low=0.0, high=1.0)
    nu: float = hp(1.0, "scale nu on the new update d^t (1: FedAvgM; 1 - beta: EMA / FedCM form)",
                   low=0.0, low_open=True)


@dataclass(frozen=True)
class ServerMomentumParams(HParams):
    """FOSM with nu fixed by the method (FedAvgM: 1; FOSM-EMA: 1 - beta)."""
    beta: float = hp(0.9, _BETA_DOC, low=0.0, high=1.0)


class MomentumServer(ServerOpt):
    """Any algorithm with Libra's server momentum, named ``<inner>+momentum``."""

    params_cls = FOSMParams
    state = MomentumState
    tag, tag_title = "momentum", "server momentum"

    @property
    def nu(self) -> float:
        return self.p.nu

    def transform(self):
        return momentum(self.p.beta, self.nu)


class FOSM(MomentumServer):
    name = "fosm"
    title = "FOSM (server momentum)"
    reference = "Libra (Zeng et al.), Algorithm 1 option (ii) and App. D"


class FedAvgM(FOSM):
    name = "fedavgm"
    title = "FedAvgM"
    reference = "Hsu, Qi & Brown 2019; FOSM with nu = 1; FedSAGD paper baseline"
    params_cls = ServerMomentumParams

    @property
    def nu(self) -> float:
        return 1.0


class FOSMEMA(FOSM):
    name = "fosm_ema"
    title = "FOSM-EMA (FedCM form)"
    reference = "Libra (Zeng et al.), FOSM with nu = 1 - beta, 'a fundamental form of FedCM'"
    params_cls = ServerMomentumParams

    @property
    def nu(self) -> float:
        return 1.0 - self.p.beta
