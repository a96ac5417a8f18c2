"""An unlearning method as a plug-in: shrink A's final model towards the initial one.

    stabkit unlearn RUN --method shrink:Shrink --hp alpha=0.3      # run next to this file

x_u = x_0 + (1 - alpha) (x_T^A - x_0): no client trains (0 client steps); alpha = 0 is doing nothing,
alpha = 1 forgets everything (back to x_0). The interface is ``stabkit.unlearn.UnlearningMethod``: a name,
a hyperparameter dataclass declared with ``stabkit.algorithms.hp`` (ranges checked, NaN refused) and
``unlearn(ctx) -> Unlearned(models [R, d], client steps [R])``; ``ctx`` is a
``stabkit.unlearn.context.UnlearnContext`` (docs/unlearning.md lists what it offers).
"""
from dataclasses import dataclass

import numpy as np

from stabkit.algorithms import HParams, hp
from stabkit.unlearn import Unlearned, UnlearningMethod


@dataclass(frozen=True)
class ShrinkParams(HParams):
    alpha: float = hp(0.5, "fraction of the way back from x_T^A to x_0", low=0.0, high=1.0)


class Shrink(UnlearningMethod):
    name = "shrink"
    title = "Shrink towards the initial model"
    reference = "an example plug-in (examples/unlearning/shrink.py)"
    params_cls = ShrinkParams

    def unlearn(self, ctx):
        x = ctx.x0 + (1 - self.p.alpha) * (ctx.x_final - ctx.x0)
        return Unlearned(x, client_steps=np.zeros(ctx.pairs))
