"""The unlearning-method interface: a plug-in like an algorithm.

A method is a class with a ``name``, ``title``, ``reference``, a frozen hyperparameter dataclass ``params_cls``
(fields declared with :func:`stabkit.algorithms.hp`, so ranges, NaN and non-integers are refused in one line)
and one function::

    class Shrink(UnlearningMethod):
        name, title, reference = "shrink", "Shrink towards x_0", "an example"
        params_cls = ShrinkParams            # e.g. alpha: float = hp(0.5, "...", low=0.0, high=1.0)

        def unlearn(self, ctx):              # ctx: stabkit.unlearn.context.UnlearnContext
            x = ctx.x0 + (1 - self.p.alpha) * (ctx.x_final - ctx.x0)
            return Unlearned(x, client_steps=np.zeros(ctx.pairs))

``unlearn`` gets the run's facts (``ctx.x_final`` = x_T^A ``[R, d]``, ``ctx.forgotten``, ...) and returns the
unlearned models ``[R, d]`` and the client gradient steps each pair's unlearning used. ``needs_updates``:
the method reads the client updates the run stored (``--store-updates``); a run without them is refused.
``--method package.module:Class`` (or an entry point in the group ``stabkit.unlearning``) names a plug-in.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from stabkit.algorithms.base import HParams
from stabkit.errors import ConfigError, require


@dataclass
class Unlearned:
    """What a method returns: the unlearned models ``x [R, d]`` and client gradient steps ``client_steps [R]``
    (minibatch-gradient evaluations on clients; 0 for a method that trains nobody)."""

    x: object
    client_steps: np.ndarray


class UnlearningMethod:
    """Base class of unlearning methods (see the module docstring)."""

    name: ClassVar[str]
    title: ClassVar[str]
    reference: ClassVar[str]
    params_cls: ClassVar[type] = HParams
    needs_updates: ClassVar[bool] = False
    integers: ClassVar[tuple] = ()  # hyperparameters that count something (refused unless whole numbers)

    def __init__(self, params=None):
        self.p = params if params is not None else self.params_cls()
        for name in self.integers:
            value = getattr(self.p, name)
            require(float(value).is_integer(), name, value, "a whole number")

    @classmethod
    def from_hp(cls, values: dict) -> "UnlearningMethod":
        """Build from ``{name: value}`` (an unknown name is one line listing the allowed ones)."""
        names = [f.name for f in dataclasses.fields(cls.params_cls)]
        for key in values:
            if key not in names:
                raise ConfigError(f"invalid hyperparameter {key!r} for unlearning method {cls.name}: allowed are "
                                  f"{', '.join(names) if names else 'none'}")
        return cls(cls.params_cls(**values))

    def unlearn(self, ctx) -> Unlearned:
        raise NotImplementedError
