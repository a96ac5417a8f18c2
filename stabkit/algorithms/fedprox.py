"""FedProx (Li et al. 2020; FedSAGD paper App. C.2).

client: y <- y - eta_l (g_i(y) + lam (y - x_t)); server as FedAvg. lam is the prox weight (Li et al.'s mu;
the FedSAGD paper calls it lambda). lam = 0 is FedAvg bitwise.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, descend, hp


@dataclass(frozen=True)
class FedProxParams(HParams):
    lam: float = hp(0.01, "proximal weight lambda (Li et al.'s mu)", low=0.0)


class FedProx(Algorithm):
    name = "fedprox"
    title = "FedProx"
    reference = "Li et al. 2020, MLSys; FedSAGD paper App. C.2"
    params_cls = FedProxParams

    def client_step(self, ctx, step, y, local, g):
        return descend(y, step.lr, g + self.p.lam * (y - ctx.x_clients)), local
