"""The learning floor: when a cell's model is said not to learn, and so is kept out of ranks, fronts and
correlations (stability at a setting that does not train says nothing).

One :class:`LearningFloor` per task: a final test accuracy below ``acc`` where the task sets one
(classification), else a final training loss above ``loss_ratio`` x its initial value (or not finite).
:data:`DEFAULT_FLOOR` is the floor of a task that sets none, e.g. in ``stabkit report --html`` of any sweep.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class LearningFloor:
    """The floor of one task: the test-accuracy floor (None: judge by the loss) and the loss-ratio ceiling."""

    acc: Optional[float] = None  # classification: final test accuracy below this = "no learning"
    loss_ratio: float = 0.9  # otherwise: final / initial training loss above this = "no learning"

    def status(self, test_acc: float, initial_loss: float, final_loss: float) -> str:
        """``ok`` or why the model does not learn."""
        if self.acc is not None and math.isfinite(test_acc):
            return "ok" if test_acc >= self.acc else f"no learning (test acc {test_acc:.3f} < {self.acc:g})"
        above = math.isfinite(initial_loss) and final_loss > self.loss_ratio * initial_loss
        if not math.isfinite(final_loss) or above:
            return f"no learning (train loss {final_loss:.3g} > {self.loss_ratio:g} x initial {initial_loss:.3g})"
        return "ok"

    def describe(self) -> str:
        """The floor in words, for a page's policy line."""
        if self.acc is not None:
            return f"final test accuracy below {self.acc:g}"
        return f"final training loss above {self.loss_ratio:g} x its initial value"


DEFAULT_FLOOR = LearningFloor()
