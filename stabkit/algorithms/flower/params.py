"""A Flower strategy's constructor arguments as stabkit hyperparameters (``--hp NAME=VALUE``).

The arguments are read from the constructor's signature and typed from its annotations: ``int``, ``float``,
``bool`` and ``str`` (each possibly ``| None``), and ``Strategy`` (the inner strategy of a wrapper such as the
differential-privacy ones, given by name: ``--hp strategy=FedAvg``, built with its defaults). The bridge sets
the sampling arguments itself (:data:`SAMPLING`), so that the strategy trains exactly the cohort stabkit
sampled, and keeps Flower's record keys (:data:`KEYS`), which its replies use; arguments of other types keep
their defaults. The values are checked where the dataclass is built, one ConfigError line per bad value.
"""
from __future__ import annotations

import dataclasses
import inspect
import typing

from stabkit.algorithms.base import HParams
from stabkit.errors import ConfigError

# sampling arguments the bridge sets: -> value for a cohort of s clients
SAMPLING = {"fraction_train": lambda s: 1.0, "min_train_nodes": lambda s: s, "min_available_nodes": lambda s: s,
            "num_sampled_clients": lambda s: s,
            "fraction_fit": lambda s: 1.0, "min_fit_clients": lambda s: s, "min_available_clients": lambda s: s}
# the bridge never evaluates: left at their defaults; a legacy strategy's initial parameters are the pair's x_0
EVALUATION = ("fraction_evaluate", "min_evaluate_nodes", "min_evaluate_clients", "initial_parameters")
KEYS = ("weighted_by_key", "arrayrecord_key", "configrecord_key")
KINDS = {int: "int", float: "float", bool: "bool", str: "str"}
REQUIRED = "<required>"  # the default of an argument the constructor has no default for


@dataclasses.dataclass(frozen=True)
class FlowerParams(HParams):
    """Base of the generated hyperparameter dataclasses: coerces and checks every field by its ``kind``."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _coerce(type(self).label, f, getattr(self, f.name)))

    @classmethod
    def describe(cls) -> list:
        return [(f.name, f.default, f.metadata["kind"] + (" or none" if f.metadata["optional"] else ""),
                 f.metadata["doc"]) for f in dataclasses.fields(cls)]


def _coerce(label: str, f, value):
    kind, optional = f.metadata["kind"], f.metadata["optional"]
    if value == REQUIRED:
        raise ConfigError(f"invalid algo={label!r}: its constructor needs {f.name} (--hp {f.name}=VALUE, {kind})")
    if value is None and optional:
        return None
    if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind == "bool" and isinstance(value, str) and value.lower() in ("true", "false"):
        value = value.lower() == "true"
    wanted = str if kind == "strategy" else {v: k for k, v in KINDS.items()}[kind]
    if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
        allowed = "the name of a Flower strategy" if kind == "strategy" else kind
        raise ConfigError(f"invalid hp {f.name}={value!r} for {label}: expected {allowed}"
                          + (" or none" if optional else ""))
    return value


def _kind(annotation):
    """``(kind, optional)`` of a constructor annotation, or None for a type the command line cannot give."""
    args = typing.get_args(annotation)
    optional = type(None) in args
    if optional:
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else None
    if annotation in KINDS:
        return KINDS[annotation], optional
    if getattr(annotation, "__name__", None) == "Strategy":
        return "strategy", optional
    return None


def params_class(cls: type, label: str) -> type:
    """The frozen hyperparameter dataclass of strategy class ``cls`` (``label``: its ``--algo`` name)."""
    try:
        hints = typing.get_type_hints(cls.__init__)
    except Exception:  # unresolvable annotations: read them as written
        hints = {}
    fields = []
    for p in list(inspect.signature(cls).parameters.values()):
        if p.name in SAMPLING or p.name in KEYS or p.name in EVALUATION or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        typed = _kind(hints.get(p.name, p.annotation))
        required = p.default is inspect.Parameter.empty
        if typed is None and required:
            raise ConfigError(f"invalid algo={label!r}: its constructor needs {p.name}, whose type "
                              f"{p.annotation!r} cannot be given as --hp")
        if typed is not None:
            meta = dict(kind=typed[0], optional=typed[1], doc=f"{cls.__name__}'s {p.name}")
            fields.append((p.name, object, dataclasses.field(default=REQUIRED if required else p.default,
                                                               metadata=meta)))
    made = dataclasses.make_dataclass(f"{cls.__name__}Params", fields, bases=(FlowerParams,), frozen=True)
    made.label = label
    return made
