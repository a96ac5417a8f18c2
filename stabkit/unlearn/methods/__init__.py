"""The built-in unlearning methods and resolving a method's name.

``none`` (doing nothing: the baseline), ``finetune`` (rounds of the run's algorithm on the remaining
clients), ``gradient-ascent`` (projected ascent on the forgotten client, Halimi et al. 2022) and
``federaser`` (calibrated stored updates, Liu et al. 2021). Any other name is an import path
``package.module:Class`` or an entry point of the group ``stabkit.unlearning`` (``stabkit.plugins``).
"""
from __future__ import annotations

from stabkit import plugins
from stabkit.errors import ConfigError
from stabkit.unlearn.base import UnlearningMethod
from stabkit.unlearn.methods.federaser import FedEraser
from stabkit.unlearn.methods.finetune import Finetune
from stabkit.unlearn.methods.gradient_ascent import GradientAscent
from stabkit.unlearn.methods.none import DoNothing

METHODS = {m.name: m for m in (DoNothing, Finetune, GradientAscent, FedEraser)}


def method_class(name: str) -> type:
    """The class of the method ``name`` (built-in, import path or entry point); one line if unknown."""
    if name in METHODS:
        return METHODS[name]
    try:
        cls = plugins.load("unlearn", name)
    except KeyError:
        allowed = ", ".join([*METHODS, *plugins.installed("unlearn")])
        raise ConfigError(f"invalid method={name!r}: one of {allowed}, or an import path package.module:Class") \
            from None
    if not (isinstance(cls, type) and issubclass(cls, UnlearningMethod)):
        raise ConfigError(f"invalid method={name!r}: a subclass of stabkit.unlearn.UnlearningMethod, "
                                  f"not {type(cls).__name__}")
    return cls


def build_method(name: str, hp: dict | None = None) -> UnlearningMethod:
    """The method ``name`` with hyperparameters ``hp`` checked (a plug-in's constructor raising: one line)."""
    cls = method_class(name)
    if name in METHODS:
        return cls.from_hp(hp or {})
    return plugins.call("unlearn", name, cls.from_hp, hp or {})
