"""``--wrap NAME:KEY=VALUE,...``: put a wrapper around the run's algorithm from the command line.

``WRAPPERS`` maps a wrapper's name to its :class:`~stabkit.algorithms.base.Wrapper` class; the keys are that
class's hyperparameters (``--wrap dp:clip=1,noise_multiplier=1.1``; omitted ones take their defaults). The
wrapper goes around everything else the run configures (plug-in checks, relaxed initialisation), so it sees
the uploads exactly as the server would.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from stabkit.algorithms.base import Algorithm
from stabkit.algorithms.dp import DP
from stabkit.errors import ConfigError, require
from stabkit.keyvalue import read_items

WRAPPERS = {"dp": DP}

WRAP_HELP = ("a wrapper around the algorithm, NAME:KEY=VALUE,... ; dp:clip=C,noise_multiplier=Z is client-level "
             "differential privacy (clipped model deltas, Gaussian noise of std Z C / s on their mean)")


def parse_wrap(spec: Optional[str]) -> Optional[tuple]:
    """``(wrapper class, {key: value})`` of a ``--wrap`` spec (None for none); a bad spec is one ConfigError
    line naming it and what is allowed."""
    if spec is None:
        return None
    name, _, rest = spec.partition(":")
    if name not in WRAPPERS:
        raise ConfigError(f"invalid wrap={spec!r}: the wrapper must be one of {', '.join(WRAPPERS)} "
                          f"(e.g. dp:clip=1,noise_multiplier=1.1)")
    values = read_items(filter(None, (s.strip() for s in rest.split(","))), "wrap", spec)
    cls = WRAPPERS[name]
    allowed = [f.name for f in dataclasses.fields(cls.params_cls)]
    for key in values:
        require(key in allowed, "wrap", spec, f"{name} takes {', '.join(allowed)} (not {key!r})")
    cls.params_cls(**values)  # the ranges, checked now: before anything is built or written
    return cls, values


def with_wrap(algo: Algorithm, spec: Optional[str]) -> Algorithm:
    """``algo`` inside the wrapper ``spec`` names, or unchanged for no spec."""
    parsed = parse_wrap(spec)
    if parsed is None:
        return algo
    cls, values = parsed
    return cls(algo, cls.params_cls(**values))


__all__ = ["WRAPPERS", "WRAP_HELP", "parse_wrap", "with_wrap"]
