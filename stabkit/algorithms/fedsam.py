"""FedSAM (Qu et al., ICML 2022; a FedSWA-paper baseline): SAM as the local optimiser, FedAvg aggregation.

    client step: g = g_i(y) on minibatch B;  eps = rho g / ||g||_2;  g_SAM = grad l_B(y + eps) (same B)
                 y <- y - eta_l g_SAM                                   (two gradient evaluations per step)
    server: FedAvg, x_{t+1} = x_t + eta mean_i (y_i - x_t).

rho_sam is not given by the FedSWA paper; default 0.05 as in the FedSWA reference code. rho = 0 is FedAvg
bit for bit. Shared SAM arithmetic and the ascent-direction choice: ``stabkit.algorithms.sam``.
"""
from stabkit.algorithms.fedavg import FedAvg
from stabkit.algorithms.sam import SAM, SAMParams


class FedSAM(SAM):
    name = "fedsam"
    title = "FedSAM"
    reference = "Qu et al. 2022, ICML (FedSAM); FedSWA paper baseline"
    inner_cls = FedAvg
    params_cls = SAMParams

