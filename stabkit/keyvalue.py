"""``KEY=VALUE`` items, read one way on every surface: ``--hp``, a variant's ``NAME[K=V,...]``, ``--wrap
NAME:K=V,...``, a sweep's ``--set`` / ``--axis``, ``stabkit unlearn --hp`` and the atlas's ``--tune KEY=V1,V2``.

:func:`scalar` reads a value, one grammar on every surface: ``none``/``null`` is None, ``true``/``false`` a bool,
``clip=1`` the integer 1 wherever it is written, ``1e-3`` a number (which YAML 1.1 would read as text), ``.inf``
as YAML writes it, anything else the text itself; :func:`value` adds a bracketed list of such values, ``[0, 20]`` (``[]`` the empty one,
as ``--set local_rounds=[]`` writes it). :func:`read_items` reads a list of items with one rule for all of them: each item
``KEY=VALUE`` with a non-empty key, and each key once (the last silently winning is what a second key never
means). A bad item is one ConfigError line naming the option, what was given and the rule.
"""
from __future__ import annotations

from typing import Callable

from stabkit.errors import ConfigError

WORDS = {"none": None, "null": None, "true": True, "false": False}  # any case, as YAML reads them


def scalar(text: str):
    """A value written as text: none/null -> None, true/false -> a bool, an int, a float (inf and nan too,
    also as YAML writes them, ``.inf``, ``-.inf``, ``.nan``: the ranges that read them refuse them), else the
    text itself."""
    if text.lower() in WORDS:
        return WORDS[text.lower()]
    if text.lower().lstrip("+-") in (".inf", ".nan"):
        text = text.replace(".", "")
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def value(text: str):
    """A value written as text: a list of :func:`scalar` values for ``[A, B, ...]``, else :func:`scalar`'s."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        return [scalar(part.strip()) for part in text[1:-1].split(",") if part.strip()]
    return scalar(text)


def read_items(items, field: str, given: str, read: Callable = value) -> dict:
    """``{key: read(text)}`` of the ``KEY=VALUE`` ``items`` (stripped; ``read`` reads each text, :func:`value`
    by default); ``field`` and ``given`` name the option and what was given in an error, ``invalid
    FIELD=GIVEN: ...``."""
    out: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"invalid {field}={given!r}: expected KEY=VALUE items, each key once, got {item!r}")
        read_value = read(text.strip())
        if key in out:
            raise ConfigError(f"invalid {field}={given!r}: {key} is given twice ({out[key]!r} and {read_value!r}); "
                              "each key once")
        out[key] = read_value
    return out
