"""``none``: doing nothing, x_u = x_T^A. Its distance to the retrain is ||x_T^A - x_T^B||, the error every
method has to beat, at no cost."""
from __future__ import annotations

import numpy as np

from stabkit.unlearn.base import Unlearned, UnlearningMethod


class DoNothing(UnlearningMethod):
    name = "none"
    title = "Do nothing"
    reference = "the baseline: A's final model as it is"

    def unlearn(self, ctx) -> Unlearned:
        return Unlearned(ctx.x_final.clone(), np.zeros(ctx.pairs))
