"""FedASAM (Caldarola, Caputo, Ciccone, ECCV 2022, with ASAM of Kwon et al., ICML 2021; a FedSWA-paper baseline).

    client step: T = |y| + eta_asam (element-wise);  eps = rho T^2 g / ||T g||_2;
                 y <- y - eta_l grad l_B(y + eps)                      (two gradient evaluations per step)
    server: FedAvg.

The FedSWA paper gives no rho or eta_asam; defaults are Kwon et al.'s (rho = 0.5 for CIFAR-10, eta = 0.01).
rho = 0 is FedAvg bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import hp
from stabkit.algorithms.fedsam import FedSAM
from stabkit.algorithms.sam import SAMParams, adaptive_perturbation


@dataclass(frozen=True)
class FedASAMParams(SAMParams):
    rho: float = hp(0.5, "ASAM perturbation radius rho_asam (Kwon et al.: 0.5 CIFAR-10, 1.0 CIFAR-100)",
                    low=0.0)
    eta_asam: float = hp(0.01, "ASAM offset eta in T = |y| + eta", low=0.0)


class FedASAM(FedSAM):
    """FedSAM with ASAM's adaptive perturbation."""

    name = "fedasam"
    title = "FedASAM"
    reference = "Caldarola et al. 2022, ECCV; ASAM: Kwon et al. 2021, ICML"
    params_cls = FedASAMParams

    def perturbation(self, y, a):
        return adaptive_perturbation(a, y, self.p.rho, self.p.eta_asam)
