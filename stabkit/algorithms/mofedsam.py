"""MoFedSAM (Qu et al., ICML 2022; a FedSWA-paper baseline, which that paper does not spell out):
local SAM on FedCM's client rule, i.e. FedCM-style client momentum along the global update direction Delta
(server state, in gradient units).

    client step: g_SAM as in FedSAM;  v = alpha_mo g_SAM + (1 - alpha_mo) Delta_t;  y <- y - eta_l v
    server:      x_{t+1} = x_t + eta mean_i (y_i - x_t)                  (FedAvg)
                 Delta_{t+1} = (1/(s K eta_l)) sum_{i in S_t} (x_t - y_i)    (Delta_0 = 0)
    eta_l is the round's (decayed) client lr.

This is exactly the ``SAM`` wrapper around ``FedCM`` (stabkit.algorithms.fedcm) with its ``model`` server
step; the momentum and the Delta bookkeeping are FedCM's. Defaults from the reference code (the FedSWA paper
gives none): SAM step eta_l (1 - 0.9) plus -0.9 eta_l Delta per step, i.e. alpha_mo = 0.1, and rho_sam = 0.1.
rho = 0 with alpha_mo = 1 is FedAvg bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import hp
from stabkit.algorithms.fedcm import FedCM, FedCMParams
from stabkit.algorithms.sam import SAM, SAMParams


@dataclass(frozen=True)
class MoFedSAMParams(SAMParams):
    rho: float = hp(0.1, "SAM perturbation radius rho_sam", low=0.0)
    alpha_mo: float = hp(0.1, "weight alpha of the local SAM gradient in v = alpha g_SAM + (1-alpha) Delta",
                         low=0.0, high=1.0, low_open=True)


class MoFedSAM(SAM):
    name = "mofedsam"
    title = "MoFedSAM"
    reference = "Qu et al. 2022, ICML (MoFedSAM, FedCM-style momentum)"
    params_cls = MoFedSAMParams

    def make_inner(self):
        """FedCM's rule with alpha = alpha_mo and its model-averaging server step (FedAvg's)."""
        return FedCM(FedCMParams(alpha=self.p.alpha_mo, server="model"))
