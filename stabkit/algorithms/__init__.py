"""Registry of FL algorithms, discovered from the modules of this package, plug-ins, and the interface to write one.

Every module defines its algorithm as an :class:`Algorithm` subclass with a ``name``; ``ALGORITHMS``
maps the built-in names to classes (FedAvg first, then alphabetical). ``algorithm_class`` also resolves
plug-ins (``stabkit.plugins``): an import path ``package.module:Class`` or an entry point of the group
``stabkit.algorithms``; ``available_algorithms`` lists built-in and installed ones. ``compose`` builds the
algorithm an :class:`~stabkit.algorithms.spec.AlgoSpec` describes (its base, then its wrappers in their order),
``build_algorithm`` validates a name and its hyperparameters, and ``resolve_hp`` gives the full hyperparameters
a run records (``config.json``'s ``hp_resolved``, which is what the bounds read).

Exported for writing an algorithm (``stabkit.algorithms.base`` documents the hooks and state declarations):

* the interface: ``Algorithm`` (FedAvg's rules), ``HParams`` with ``hp`` / ``choice`` (hyperparameter
  fields), ``Given`` (state names that depend on a hyperparameter), ``RoundContext`` and ``Step`` (what the hooks see), ``descend`` (the local SGD step);
* composition: ``Wrapper`` (delegates every hook to an inner algorithm) and the wrappers built on it,
  ``SAM`` (+ ``SAMParams``: sharpness-aware ascent around any client rule), ``RelaxedInit``
  (+ ``RIParams``: FedInit's relaxed initialisation around any algorithm) and ``DP`` (+ ``DPParams``:
  client-level differential privacy around any algorithm that uploads its model delta; ``--wrap dp:...``);
* the server-optimizer slot (``stabkit.algorithms.server_opt``): ``Transform`` (an optax-style ``(init,
  update)`` pair applied to the mean upload) and ``ServerOpt`` (the wrapper that puts one in any algorithm's
  server; FedAdam and the FOSM family are built on it);
* shared update rules (``stabkit.algorithms.rules``): ``on_clients``, ``client_delta``, ``server_step``,
  ``gradient_units``, ``full_gradient_at_x``, ``lookahead_server``.
"""
import dataclasses
import importlib
import pkgutil
from typing import Callable, Optional

from stabkit import plugins
from stabkit.algorithms.base import Algorithm, Given, HParams, RoundContext, Step, Wrapper, choice, hp
from stabkit.algorithms.dp import DP, DPParams
from stabkit.algorithms.flower import flower_class, is_flower
from stabkit.algorithms.relaxed_init import RelaxedInit, RIParams
from stabkit.algorithms.rules import (
    client_delta,
    descend,
    full_gradient_at_x,
    gradient_units,
    lookahead_server,
    on_clients,
    server_step,
)
from stabkit.algorithms.sam import SAM, SAMParams
from stabkit.algorithms.server_opt import ServerOpt, Transform
from stabkit.algorithms.spec import AlgoSpec
from stabkit.algorithms.wrap import WRAPPERS
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


def algorithm_class(name: str) -> type:
    """The :class:`Algorithm` subclass ``name`` names: built-in, a Flower strategy (``flwr:...``), installed
    entry point, or import path; a variant (``NAME[KEY=VALUE,...]``, :mod:`stabkit.algorithms.variant`) names
    its base's class, its fixed values checked against that class's hyperparameters."""
    spec = AlgoSpec.parse(name)
    if spec.hp:
        compose(spec)
    return _base_class(spec.base)


def _base_class(name: str) -> type:
    if name in ALGORITHMS:
        return ALGORITHMS[name]
    if is_flower(name):
        return flower_class(name)
    cls = plugins.resolve("algo", name, ALGORITHMS, "package.module:Class")
    ok = isinstance(cls, type) and issubclass(cls, Algorithm) and isinstance(vars(cls).get("name"), str)
    if not ok:
        raise ConfigError(f"invalid algo={name!r}: {cls!r} is not a stabkit.algorithms.Algorithm subclass "
                          f"with a name")
    return cls


def available_algorithms() -> dict:
    """Built-in and installed plug-in algorithms, ``{--algo name: class}`` (built-ins first); an installed
    entry point that does not load is named in one warning and left out."""
    found = dict(ALGORITHMS)
    for name in plugins.installed("algo"):
        if name not in found:
            try:
                found[name] = algorithm_class(name)
            except ConfigError as e:  # a broken plug-in: warned about and left out, the rest is listed
                plugins.warn_broken("algo", name, e)
    return found


def compose(spec: AlgoSpec, guard: Optional[Callable] = None) -> Algorithm:
    """The algorithm ``spec`` describes: its base built from its hyperparameters (a variant's fixed values
    and the given ones; defaults for the rest), then each of its wrappers around it, in the spec's order
    (:data:`~stabkit.algorithms.wrap.WRAPPERS`'s, innermost first). ``guard`` (the engine's
    :class:`~stabkit.engine.contract.CheckedAlgorithm`) goes around a plug-in's base before any wrapper, so that
    what its hooks return is checked where the wrappers read it."""
    cls = _base_class(spec.base)
    if spec.base in ALGORITHMS:
        algo = cls.from_hp(spec.hp)
    else:
        algo = plugins.call("algo", spec.base, cls.from_hp, spec.hp)  # a plug-in whose __init__ raises: one line
        algo = guard(algo) if guard is not None else algo
    for name, values in spec.wrappers:
        wrapper = WRAPPERS[name]
        algo = wrapper.around(algo, wrapper.params_cls(**values))
    return algo


def build_algorithm(name: str, hp: dict | None = None) -> Algorithm:
    """The algorithm ``name`` with hyperparameters ``hp`` (a variant's fixed values, then defaults, for the rest)."""
    return compose(AlgoSpec.parse(name, hp))


def is_builtin(name: str) -> bool:
    """Whether ``name`` is a built-in algorithm or a variant of one (plug-ins get their hooks checked)."""
    return AlgoSpec.parse(name).base in ALGORITHMS


def resolve_hp(name: str, hp: dict | None = None) -> dict:
    """The algorithm's full hyperparameters: ``hp`` validated, with its declared defaults filled in."""
    return dataclasses.asdict(build_algorithm(name, hp).p)


__all__ = ["ALGORITHMS", "AlgoSpec", "Algorithm", "DP", "DPParams", "Given", "HParams", "RIParams", "RelaxedInit", "RoundContext", "SAM",
           "SAMParams", "ServerOpt", "Step", "Transform", "Wrapper", "algorithm_class", "available_algorithms",
           "build_algorithm", "choice", "compose", "is_builtin", "client_delta", "descend", "full_gradient_at_x", "gradient_units", "hp",
           "lookahead_server", "on_clients", "resolve_hp", "server_step"]
