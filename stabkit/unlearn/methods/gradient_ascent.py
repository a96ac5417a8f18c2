"""``gradient-ascent``: projected gradient ascent on the forgotten client's own data (Halimi et al. 2022,
"Federated Unlearning: How to Efficiently Erase a Client in FL?", Algorithm 1's unlearning phase).

From x_T^A the forgotten client takes ``steps`` minibatch steps y <- y + lr g (the run's batch size and
clipping, its lr unless ``lr`` is given), each followed by the projection onto the ball of radius ``radius``
around x_T^A (the norm budget: the ascent cannot run away, the loss being unbounded above for
classification). Cost: ``steps`` client steps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import numpy as np

from stabkit.algorithms.base import HParams, hp
from stabkit.algorithms.dp import clip_rows
from stabkit.unlearn.base import Unlearned, UnlearningMethod

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class GradientAscentParams(HParams):
    steps: int = hp(10, "ascent steps on the forgotten client (the step budget)", low=1)
    lr: Optional[float] = hp(None, "ascent step size; none = the run's client lr at its last round", low=0.0,
                             low_open=True, optional=True)
    radius: float = hp(0.5, "norm budget: ||x_u - x_T^A|| <= radius (Euclidean projection after each step)",
                       low=0.0, low_open=True)


def project(y: torch.Tensor, centre: torch.Tensor, radius: float) -> torch.Tensor:
    """The Euclidean projection of every row of ``y`` onto the ball of ``radius`` around ``centre``'s row: the
    step from the centre clipped to norm ``radius``, as DP clips a client's delta."""
    return centre + clip_rows(y - centre, radius)


class GradientAscent(UnlearningMethod):
    name = "gradient-ascent"
    title = "Projected gradient ascent on the forgotten client"
    reference = "Halimi et al. 2022, arXiv:2207.05521, Alg. 1"
    params_cls = GradientAscentParams
    integers = ("steps",)

    def unlearn(self, ctx) -> Unlearned:
        lr = self.p.lr if self.p.lr is not None else ctx.lr(ctx.rounds - 1)
        y = ctx.x_final
        for k in range(int(self.p.steps)):  # one step at a time: the projection follows every step
            y = project(ctx.local_sgd(y, ctx.forgotten, 1, lr, ("gradient-ascent", k), ascent=True),
                        ctx.x_final, self.p.radius)
        return Unlearned(y, np.full(ctx.pairs, float(self.p.steps)))
