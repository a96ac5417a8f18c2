"""Shared sharpness-aware-minimisation (SAM) machinery for the SAM baselines of the FedSWA paper (SAM: its App. A).

SAM's first-order inner maximisation perturbs the local model along the (scaled) gradient direction a:

    L2 (Foret et al.):        eps = rho a / ||a||_2                          (per client vector)
    adaptive (ASAM, Kwon):    T = |y| + eta (element-wise),  eps = rho T^2 a / ||T a||_2

and the descent then uses the gradient at the perturbed point on the same minibatch:
g_SAM = grad l_B(y + eps) (one more gradient evaluation per local step). Where the norm is zero the
perturbation is zero (no NaN), and rho = 0 gives eps = 0 exactly, so y + eps == y bit for bit.

``SAM`` is a :class:`~stabkit.algorithms.base.Wrapper` that turns any client rule into its SAM version: it
replaces the gradient handed to the inner rule's ``client_step`` by g_SAM (FedSAM = ``SAM`` around FedAvg,
MoFedSAM = ``SAM`` around FedCM's rule, ``SAM(FedProx(), SAMParams(rho=0.1))`` is FedProx-SAM).
Subclasses change ``perturbation`` (FedASAM).

Ascent direction (``ascent``): the engine hands ``client_step`` the *processed* g (clipped, plus weight
decay mu y under ``weight_decay_placement=gradient``; the default placement adds the decay after the step,
so there g is the clipped loss gradient and both ascents coincide). PyTorch SAM implementations (Foret et al.,
davda54/sam, Qu et al.'s FedSAM) ascend along the raw minibatch loss gradient; weight decay is applied by
the base optimiser only. ``ascent="loss"``
(default) therefore removes the weight-decay term, a = g - ctx.process(0, y) = g - mu y, without any
extra gradient evaluation; clipping only rescales g by a positive scalar and both perturbations are
invariant to that scale, so a has the raw loss gradient's direction. ``ascent="processed"`` uses g as
handed over. With weight_decay = 0 both give the same eps. The descent gradient g_SAM is treated like
every gradient: ``ctx.process(grad(y + eps), y)`` (clipped, weight decay at y, not at y + eps).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported by the engine; listing algorithms needs no torch
    import torch

from stabkit.algorithms.base import HParams, Wrapper, choice, hp

ASCENTS = ("loss", "processed")


def _scaled(v: torch.Tensor, norm: torch.Tensor, rho: float) -> torch.Tensor:
    """rho v / norm per client vector, 0 where norm == 0 (then v == 0 too, so no NaN appears)."""
    safe = norm.where(norm > 0, norm.new_ones(()))
    return v * (rho / safe)


def l2_perturbation(a: torch.Tensor, rho: float) -> torch.Tensor:
    """SAM's eps = rho a / ||a||_2 over the last dimension (0 where a == 0)."""
    return _scaled(a, a.norm(dim=-1, keepdim=True), rho)


def adaptive_perturbation(a: torch.Tensor, y: torch.Tensor, rho: float, eta: float) -> torch.Tensor:
    """ASAM's eps = rho T^2 a / ||T a||_2 with T = |y| + eta element-wise (0 where T a == 0)."""
    T = y.abs() + eta
    Ta = T * a
    return _scaled(T * Ta, Ta.norm(dim=-1, keepdim=True), rho)


@dataclass(frozen=True)
class SAMParams(HParams):
    rho: float = hp(0.05, "SAM perturbation radius rho_sam (0 = no perturbation)", low=0.0)
    ascent: str = choice("loss", "gradient the perturbation ascends along: loss = raw minibatch loss "
                         "gradient (weight decay removed; PyTorch SAM), processed = the engine's g",
                         ASCENTS)


class SAM(Wrapper):
    """Local SAM around ``inner``'s client rule: ``client_step`` gets g_SAM instead of g (hyperparameters
    :class:`SAMParams` or a subclass of it)."""

    params_cls = SAMParams
    tag, tag_title = "sam", "SAM"

    def ascent_direction(self, ctx, y, g):
        if self.p.ascent == "loss":
            return g - ctx.process(g.new_zeros(g.shape), y)
        return g

    def perturbation(self, y, a):
        return l2_perturbation(a, self.p.rho)

    def client_step(self, ctx, step, y, local, g):
        """The inner rule applied to g_SAM: the processed minibatch gradient at y + eps (same minibatch;
        one more gradient evaluation)."""
        eps = self.perturbation(y, self.ascent_direction(ctx, y, g))
        return super().client_step(ctx, step, y, local, ctx.process(step.grad(y + eps), y))


__all__ = ["ASCENTS", "SAM", "SAMParams", "adaptive_perturbation", "l2_perturbation"]
