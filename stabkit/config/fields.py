"""Fields of the config dataclasses: ``option`` declares one (default + ``stabkit pair`` help), and the type checks
of a config dataclass's fields, read from its annotations, run before any range check.

Config files and the Python API can hand a dataclass any value (``rounds: true``, ``seed: abc``,
``local_rounds: 5``); without this check they fail deep inside as a TypeError or are silently coerced
(a bool is an int). Every float field must also be finite: ``inf``/``nan`` pass range checks such as
``x >= 0`` and would only surface as a diverging run.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import field

from stabkit.errors import require


def option(default, help: str, cli_name: str | None = None, choices: tuple | None = None):
    """A configuration field that is also a ``stabkit pair`` option: its default and its ``--help`` text (the
    CLI generates the option from this metadata; ``cli_name`` when the option is named differently; ``choices``
    the fixed values it takes, the tuple its validation checks, shown in ``--help``)."""
    return field(default=default, metadata={"help": help, "cli_name": cli_name, "choices": choices})


_WHAT = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string",
         tuple: "a list", dict: "a mapping"}


def _accepts(kind, value) -> bool:
    if kind is type(None):
        return value is None
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, kind)


def _members(annotation) -> tuple:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (typing.get_origin(annotation) or annotation,)


@functools.cache
def _hints(cls: type) -> dict:
    """The resolved annotations of a dataclass (resolved once: a sweep of thousands of jobs checks each)."""
    return typing.get_type_hints(cls)


def check_field_types(obj, names: dict | None = None) -> None:
    """Raise a one-line ConfigError for the first field of dataclass ``obj`` whose value has the wrong type;
    ``names`` maps a field to the name the user gives it (e.g. TaskOptions' ``seed`` is ``data_seed``)."""
    hints = _hints(type(obj))
    for f in dataclasses.fields(obj):
        kinds = _members(hints[f.name])
        value = getattr(obj, f.name)
        if any(_accepts(k, value) for k in kinds):
            continue
        wanted = [_WHAT.get(k, getattr(k, "__name__", str(k))) for k in kinds if k is not type(None)]
        allowed = " or ".join(wanted) + (" (or none)" if type(None) in kinds else "")
        require(False, (names or {}).get(f.name, f.name), value, allowed)
