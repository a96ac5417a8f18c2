"""Readable names for legends and tables: an algorithm's title (``FedAvg``, not ``algo=fedavg``), other
swept values as ``name value``."""
from __future__ import annotations

from stabkit.analysis.labels import value_text


def algo_title(algo) -> str:
    """The algorithm's ``title`` (its paper's name), with the algorithm it equals at the defaults where it has
    one (``FedAvgM (= FOSM, ν = 1)``, :mod:`stabkit.atlas.aliases`) and a variant's fixed values
    (``DP-FedAvg (noise_multiplier = 3)``); a plug-in or unknown name as given."""
    from stabkit.algorithms import algorithm_class
    from stabkit.algorithms.variant import variant_note
    from stabkit.atlas.aliases import alias_note
    from stabkit.errors import ConfigError

    try:
        cls = algorithm_class(str(algo))
    except ConfigError:
        return str(algo)
    return (getattr(cls, "title", None) or getattr(cls, "name", str(algo))) + alias_note(str(algo)) + variant_note(str(algo))


def setting_name(values: dict) -> str:
    """``FedAvg, lr 0.1``: the algorithm by its title first, then the other values; "all" if none vary."""
    parts = [algo_title(values["algo"])] if "algo" in values else []
    parts += [f"{k.removeprefix('hp.')} {value_text(v)}" for k, v in values.items() if k != "algo"]
    return ", ".join(parts) or "all"
