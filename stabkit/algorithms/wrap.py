"""The wrappers an algorithm spec composes around its base, by name and in order; ``--wrap NAME:KEY=VALUE,...``.

``WRAPPERS`` maps a wrapper's name to its :class:`~stabkit.algorithms.base.Wrapper` class, innermost first: the
order in which :func:`stabkit.algorithms.compose` puts them around the base algorithm (relaxed initialisation,
``ri``, then client-level DP, ``dp``, which goes around everything else the run configures so that it sees the
uploads exactly as the server would). A wrapper's keys are its class's hyperparameters (``--wrap
dp:clip=1,noise_multiplier=1.1``; omitted ones take their defaults); ``--wrap`` names ``dp``, relaxed
initialisation has its own options (``--ri-beta``, ``--ri-aggregation``).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from stabkit.algorithms.dp import DP
from stabkit.algorithms.relaxed_init import RelaxedInit
from stabkit.errors import require
from stabkit.keyvalue import read_items

WRAPPERS = {"ri": RelaxedInit, "dp": DP}  # innermost first
WRAP_OPTION = ("dp",)  # the wrappers --wrap names

WRAP_HELP = ("a wrapper around the algorithm, NAME:KEY=VALUE,... ; dp:clip=C,noise_multiplier=Z is client-level "
             "differential privacy (clipped model deltas, Gaussian noise of std Z C / s on their mean)")


def parse_wrap(spec: Optional[str]) -> Optional[tuple]:
    """``(wrapper name, {key: value})`` of a ``--wrap`` spec (None for none); a bad spec is one ConfigError
    line naming it and what is allowed."""
    if spec is None:
        return None
    name, _, rest = spec.partition(":")
    require(name in WRAP_OPTION, "wrap", spec, f"the wrapper must be one of {', '.join(WRAP_OPTION)} "
            f"(e.g. dp:clip=1,noise_multiplier=1.1)")
    return name, wrapper_values(name, read_items(filter(None, (s.strip() for s in rest.split(","))), "wrap",
                                                 spec), spec)


def wrapper_values(name: str, values: dict, given) -> dict:
    """``values``, checked as the hyperparameters of wrapper ``name`` (its keys and ranges, now: before anything
    is built or written); ``given`` is what an error names."""
    cls = WRAPPERS[name]
    allowed = [f.name for f in dataclasses.fields(cls.params_cls)]
    for key in values:
        require(key in allowed, "wrap", given, f"{name} takes {', '.join(allowed)} (not {key!r})")
    cls.params_cls(**values)
    return dict(values)


__all__ = ["WRAPPERS", "WRAP_HELP", "WRAP_OPTION", "parse_wrap", "wrapper_values"]
