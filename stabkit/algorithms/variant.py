"""Named variants: an algorithm with some hyperparameters fixed in its name, ``dp_fedavg[noise_multiplier=3]``.

A variant is a name wherever an algorithm name goes (``--algo``, a sweep's ``algo`` axis, the atlas's
``--algos``), so one algorithm can appear at several settings side by side, each its own row: the atlas
measures DP-FedAvg at several noise levels this way. The fixed values are the algorithm's hyperparameters,
typed as ``--hp`` types them; a run's ``--hp`` may add others but not contradict them (one line naming the
clash). ``split_variant`` is the one place the syntax is read.
"""
from __future__ import annotations

import re

from stabkit.errors import ConfigError
from stabkit.keyvalue import read_items

_VARIANT = re.compile(r"^(?P<base>[^\[\]]+)\[(?P<args>[^\[\]]*)\]$")


def split_names(text: str) -> list:
    """A comma-separated list of algorithm names, a variant's own commas (inside its brackets) kept:
    ``"fedavg,dp_fedavg[clip=2,noise_multiplier=3]"`` -> ``["fedavg", "dp_fedavg[clip=2,noise_multiplier=3]"]``."""
    return [n.strip() for n in re.split(r",(?![^\[]*\])", text) if n.strip()]


def split_variant(name: str) -> tuple:
    """``(base name, {hp: value})`` of ``name``: ``("dp_fedavg", {"noise_multiplier": 3})`` for
    ``dp_fedavg[noise_multiplier=3]``, ``(name, {})`` for a plain name; a malformed variant is one line."""
    if "[" not in name and "]" not in name:
        return name, {}
    match = _VARIANT.match(name)
    if match is None:
        raise ConfigError(f"invalid algo={name!r}: a variant is NAME[KEY=VALUE,...], e.g. "
                          f"dp_fedavg[noise_multiplier=3]")
    fixed = read_items(filter(None, (s.strip() for s in match["args"].split(","))), "algo", name)
    if not fixed:
        raise ConfigError(f"invalid algo={name!r}: a variant fixes at least one hyperparameter, NAME[KEY=VALUE]")
    return match["base"].strip(), fixed


def merged_hp(name: str, hp: dict | None) -> tuple:
    """``(base name, hyperparameters)``: the variant's fixed values with ``hp``'s; ``hp`` contradicting a
    fixed value is one line naming both."""
    base, fixed = split_variant(name)
    hp = dict(hp or {})
    for key, value in fixed.items():
        if key in hp and hp[key] != value:
            raise ConfigError(f"invalid hp {key}={hp[key]!r}: algorithm {name} fixes {key}={value!r} (leave "
                              f"it out of --hp, or name the base algorithm {base})")
    return base, {**hp, **fixed}


def variant_note(name: str) -> str:
    """`` (noise_multiplier = 3)`` for a variant, ``""`` for a plain name: what a title adds."""
    _, fixed = split_variant(name)
    return f" ({', '.join(f'{k} = {v}' for k, v in fixed.items())})" if fixed else ""
