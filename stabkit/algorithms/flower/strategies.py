"""Which Flower strategy an ``flwr:`` name means, and whether the bridge can drive it.

``flwr:NAME`` is a class of ``flwr.serverapp.strategy`` (Message API); ``flwr:package.module:Class`` a
user's class (Message API, or a legacy ``flwr.server.strategy.Strategy``), imported like every plug-in
(:mod:`stabkit.plugins`). Every failure is one ConfigError line.
"""
from __future__ import annotations

import inspect

from stabkit import plugins
from stabkit.errors import ConfigError
from stabkit.extras import require_extra

PREFIX = "flwr:"  # --algo flwr:NAME
# shipped strategies the bridge refuses, and why
UNSUPPORTED = {
    "QFedAvg": "it weighs clients by their training loss at the global model, which stabkit's batched local "
               "rule does not report",
    "FedXgbBagging": "it aggregates XGBoost trees, not parameter arrays",
    "FedXgbCyclic": "it aggregates XGBoost trees, not parameter arrays",
    "FedXgbNnAvg": "it aggregates XGBoost trees with the arrays",
    "Strategy": "it is the abstract base class",
}


def shipped() -> list:
    """Names of the Message-API strategies Flower ships that the bridge drives."""
    module = require_extra("flower").serverapp.strategy
    base = module.Strategy
    return sorted(n for n in module.__all__ if inspect.isclass(getattr(module, n)) and n not in UNSUPPORTED
                  and issubclass(getattr(module, n), base))


def strategy_class(label: str, spec: str) -> type:
    """The Message-API strategy class ``spec`` names (``NAME`` or ``package.module:Class``); ``label`` is the
    ``--algo`` value the errors quote."""
    flwr = require_extra("flower")
    from flwr.serverapp.strategy import Strategy

    if plugins.is_import_path(spec):
        cls = plugins.load("algo", spec)
        refused = next((c.__name__ for c in getattr(cls, "__mro__", ()) if c.__module__.startswith("flwr.")
                        and c.__name__ in UNSUPPORTED and c.__name__ != "Strategy"), None)
        if refused:  # a legacy twin (flwr.server.strategy:QFedAvg), or a subclass of a refused strategy
            raise ConfigError(f"invalid algo={label!r}: the bridge does not drive {refused}: {UNSUPPORTED[refused]}")
    else:
        if spec in UNSUPPORTED:
            raise ConfigError(f"invalid algo={label!r}: the bridge does not drive {spec}: {UNSUPPORTED[spec]}")
        cls = getattr(flwr.serverapp.strategy, spec, None)
        if cls is None:
            raise ConfigError(f"invalid algo={label!r}: flwr.serverapp.strategy has no strategy {spec!r}: one of "
                              f"{', '.join(shipped())}, or flwr:package.module:Class")
    if not (inspect.isclass(cls) and (issubclass(cls, Strategy) or is_legacy(cls))) or inspect.isabstract(cls):
        raise ConfigError(f"invalid algo={label!r}: {cls!r} is not a concrete flwr.serverapp.strategy.Strategy "
                          "subclass (Message API: configure_train, aggregate_train) nor a legacy "
                          "flwr.server.strategy.Strategy (configure_fit, aggregate_fit)")
    return cls


def is_legacy(cls) -> bool:
    """``cls`` is a legacy strategy (``flwr.server.strategy.Strategy``: configure_fit / aggregate_fit)."""
    from flwr.server.strategy import Strategy as LegacyStrategy

    return inspect.isclass(cls) and issubclass(cls, LegacyStrategy)
