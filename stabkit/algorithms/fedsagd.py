"""FedSAGD, Algorithm 1 of the FedSAGD paper.

    local:  m = beta_local v_t + g ;  y <- y - eta_l (m + (lam + mu) y - lam x_t)          (lines 9-10)
    server: Delta = mean_i (y_i - x_t)
            v_{t+1} = beta/(1+beta) v_t - Delta / ((1+beta) eta_l K)                        (line 15)
            x_{t+1} = x_t + eta Delta                                                       (line 16)

The hybrid proximal term is FedProx's prox (lam) plus L2 weight decay (mu). Algorithm 1 uses one beta in
both places; the authors' code has a separate local weight beta_0 = 0.1 (not in the paper), so ``beta_local``
defaults to ``beta`` (Algorithm 1) and can be set separately. beta = lam = mu = 0 is FedAvg bitwise.
``eta_l`` in line 15 is the round's (decayed) client lr.
"""
from dataclasses import dataclass
from typing import Optional

from stabkit.algorithms.base import Algorithm, HParams, descend, hp
from stabkit.algorithms.rules import lookahead_server, on_clients


def local_weight(beta: float, beta_local: Optional[float]) -> float:
    """The weight of v_t in FedSAGD's local step (line 9): ``beta_local``, or the server momentum ``beta`` when
    it is unset (Algorithm 1). The one statement of the rule: the algorithm and its bounds read it here."""
    return beta if beta_local is None else beta_local

@dataclass(frozen=True)
class FedSAGDParams(HParams):
    beta: float = hp(0.9, "server momentum beta of line 15 (and of line 9 unless beta_local is set)",
                     low=0.0, high=1.0, high_open=True)
    beta_local: Optional[float] = hp(None, "weight of v_t in the local step (line 9); none = beta "
                                     "(Algorithm 1); the authors' code uses beta_0 = 0.1",
                                     low=0.0, high=1.0, optional=True)
    lam: float = hp(0.01, "proximal weight lambda (pull towards x_t)", low=0.0)
    mu: float = hp(0.001, "weight decay mu of the hybrid prox (the saturation mechanism)", low=0.0)


class FedSAGD(Algorithm):
    name = "fedsagd"
    title = "FedSAGD"
    reference = "FedSAGD, ICLR 2026 submission, Algorithm 1"
    params_cls = FedSAGDParams
    server_state = ("v",)

    @property
    def beta_local(self) -> float:
        return local_weight(self.p.beta, self.p.beta_local)

    def client_step(self, ctx, step, y, local, g):
        p = self.p
        m = self.beta_local * on_clients(ctx.server["v"]) + g
        return descend(y, step.lr, m + (p.lam + p.mu) * y - p.lam * ctx.x_clients), local

    def server_update(self, ctx, means):
        return lookahead_server(ctx, means, self.p.beta)
