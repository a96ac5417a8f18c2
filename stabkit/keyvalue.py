"""``KEY=VALUE`` items, read one way on every surface: ``--hp``, a variant's ``NAME[K=V,...]``, ``--wrap
NAME:K=V,...``, a sweep's ``--set`` / ``--axis`` and the atlas's ``--tune KEY=V1,V2``.

:func:`scalar` reads a value (``clip=1`` is the integer 1 wherever it is written, ``1e-3`` a number, which YAML
1.1 would read as text); :func:`read_items` reads a list of items with one rule for all of them: each item
``KEY=VALUE`` with a non-empty key, and each key once (the last silently winning is what a second key never
means). A bad item is one ConfigError line naming the option, what was given and the rule.
"""
from __future__ import annotations

from typing import Callable

from stabkit.errors import ConfigError


def scalar(text: str):
    """A value written as text: none/null -> None, an int, a float (inf and nan too: the ranges that read them
    refuse them), else the text itself."""
    if text.lower() in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def read_items(items, field: str, given: str, value: Callable = scalar) -> dict:
    """``{key: value(text)}`` of the ``KEY=VALUE`` ``items`` (stripped; ``value`` reads each text, :func:`scalar`
    by default); ``field`` and ``given`` name the option and what was given in an error, ``invalid
    FIELD=GIVEN: ...``."""
    out: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"invalid {field}={given!r}: expected KEY=VALUE items, each key once, got {item!r}")
        read = value(text.strip())
        if key in out:
            raise ConfigError(f"invalid {field}={given!r}: {key} is given twice ({out[key]!r} and {read!r}); each "
                              "key once")
        out[key] = read
    return out
