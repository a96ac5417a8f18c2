"""Registry of FL algorithms, discovered from the modules of this package.

Every module defines its algorithm as an :class:`Algorithm` subclass with a ``name``; ``ALGORITHMS``
maps names to classes (FedAvg first, then alphabetical), ``build_algorithm`` validates a name and
its hyperparameters, and ``resolve_hp`` gives the full hyperparameters a run records (``config.json``'s
``hp_resolved``, which is what the bounds read).
"""
import dataclasses
import importlib
import pkgutil

from stabkit.algorithms.base import Algorithm, HParams, RoundContext
from stabkit.errors import ConfigError


def _discover() -> dict:
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if (isinstance(obj, type) and issubclass(obj, Algorithm) and obj.__module__ == module.__name__
                    and "name" in vars(obj)):
                found[obj.name] = obj
    return dict(sorted(found.items(), key=lambda kv: (kv[0] != "fedavg", kv[0])))


ALGORITHMS = _discover()


def build_algorithm(name: str, hp: dict | None = None) -> Algorithm:
    """The algorithm ``name`` with hyperparameters ``hp`` (defaults for the rest)."""
    if name not in ALGORITHMS:
        raise ConfigError(f"invalid algo={name!r}: one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name].from_hp(hp or {})


def resolve_hp(name: str, hp: dict | None = None) -> dict:
    """The algorithm's full hyperparameters: ``hp`` validated, with its declared defaults filled in."""
    return dataclasses.asdict(build_algorithm(name, hp).p)


__all__ = ["ALGORITHMS", "Algorithm", "HParams", "RoundContext", "build_algorithm", "resolve_hp"]
