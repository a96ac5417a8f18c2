"""FedLESAM (Fan et al., ICML 2024; a FedSWA-paper baseline): locally estimated global SAM perturbation.

    client i stores theta_old_i = the global model it received at its previous participation
    round t: delta = theta_old_i - x_t;  eps = rho delta / ||delta||_2   (fixed for the whole round)
             each step: y <- y - eta_l grad l_B(y + eps)       (ONE gradient evaluation: ``grad_point``)
    after the round: theta_old_i <- x_t;  server: FedAvg.

The gradient at y + eps is processed at y (clipping, weight decay mu y), as for FedSAM. eps = 0 where
delta = 0. First participation (no theta_old; not specified by the paper), ``first``:
  * ``sgd`` (default): eps = 0, plain SGD steps. "Has participated" is the client
    state ``seen`` (0 until the client's first round, then 1; only its first entry is read);
  * ``x0``: theta_old starts at the initial global model x_0 (as if received before round 0), so a
    client's first round perturbs along x_0 - x_t (eps = 0 in round 0).
Per-client state is carried by the engine for clients that are not sampled. rho = 0 is FedAvg bit for bit.
(Fan et al.'s FedLESAM-S / -D variants on SCAFFOLD / FedDyn are not implemented.)
"""
from dataclasses import dataclass

from stabkit.algorithms.base import HParams, Wrapper, choice, hp
from stabkit.algorithms.fedavg import FedAvg
from stabkit.algorithms.sam import l2_perturbation

FIRST = ("sgd", "x0")


@dataclass(frozen=True)
class FedLESAMParams(HParams):
    rho: float = hp(0.05, "perturbation radius rho_sam (not given by the FedSWA paper)", low=0.0)
    first: str = choice("sgd", "first participation (paper silent): sgd = no perturbation, "
                        "x0 = theta_old starts at the initial global model", FIRST)


class FedLESAM(Wrapper):
    """The locally estimated perturbation around FedAvg's rule (the inner rule evaluates its gradients at
    its own gradient point + eps)."""

    name = "fedlesam"
    title = "FedLESAM"
    reference = "Fan et al. 2024, ICML (FedLESAM); FedSWA paper baseline"
    inner_cls = FedAvg
    params_cls = FedLESAMParams
    client_state = ("theta_old", "seen")
    local_state = ("eps",)


    def init_state(self, x, num_rows):
        server, client = super().init_state(x, num_rows)
        if self.p.first == "x0":
            client["theta_old"] = x[:, :, None, :].expand(-1, -1, num_rows, -1).clone()
        return server, client

    def client_init(self, ctx):
        """The round's eps [R, 2, s, d], fixed for all local steps."""
        y, local = self.inner.client_init(ctx)
        eps = l2_perturbation(ctx.client["theta_old"] - ctx.x_clients, self.p.rho)
        if self.p.first == "sgd":
            eps = eps.where(ctx.client["seen"][..., :1] > 0, eps.new_zeros(()))
        return y, {**local, "eps": eps}

    def grad_point(self, ctx, step, y, local):
        return super().grad_point(ctx, step, y, local) + local["eps"]

    def client_final(self, ctx, start, y, local):
        uploads, new_client = super().client_final(ctx, start, y, local)
        return uploads, {**new_client, "theta_old": ctx.x_clients, "seen": ctx.x_clients.new_ones(ctx.x_clients.shape)}
