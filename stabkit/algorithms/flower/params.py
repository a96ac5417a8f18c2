"""A Flower strategy's constructor arguments as stabkit hyperparameters (``--hp NAME=VALUE``).

The arguments are read from the constructor's signature and typed from its annotations: ``int``, ``float``,
``bool`` and ``str`` (each possibly ``| None``), and ``Strategy`` (the inner strategy of a wrapper such as the
differential-privacy ones, given by name: ``--hp strategy=FedAvg``, built with its defaults). The bridge sets
the sampling arguments itself (:data:`SAMPLING`), so that the strategy trains exactly the cohort stabkit
sampled, and keeps Flower's record keys (:data:`KEYS`), which its replies use; arguments of other types keep
their defaults. The values are checked where the dataclass is built, one ConfigError line per bad value: the
type, finiteness for every number (a user's strategy too), and for the shipped strategies the range
:data:`RANGES` gives (found by class name along the class's bases, so a subclass of FedAdam gets FedAdam's).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
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

# (low, high, low_open, high_open) of the shipped strategies' arguments, from their papers and Flower's docs:
# a step size is > 0 (eta=-1 would run gradient ascent), a momentum or Adam decay in [0, 1), a trimmed share
# below 1/2 (Yin et al. 2018: beta of the replies from each end), a noise multiplier >= 0, a clipping norm > 0,
# a quantile in [0, 1]. How many malicious nodes Krum/MultiKrum/Bulyan tolerate depends on the cohort
# (n > 2f + 2, n >= 4f + 3): checked where the strategy is built (bridge._check_cohort_size).
POSITIVE, NONNEGATIVE, DECAY, UNIT = (0, math.inf, True, True), (0, math.inf, False, True), (0, 1, False, True), \
    (0, 1, False, False)
_DP_FIXED = {"noise_multiplier": NONNEGATIVE, "clipping_norm": POSITIVE, "clip_norm": POSITIVE}
_DP_ADAPTIVE = {"noise_multiplier": NONNEGATIVE, "initial_clipping_norm": POSITIVE, "init_clip_norm": POSITIVE,
                "target_clipped_quantile": UNIT, "clip_norm_target_quantile": UNIT, "clip_norm_lr": POSITIVE,
                "clipped_count_stddev": NONNEGATIVE, "clip_count_stddev": NONNEGATIVE}
RANGES = {
    "FedAvgM": {"server_learning_rate": POSITIVE, "server_momentum": DECAY},
    "FedOpt": {"eta": POSITIVE, "eta_l": POSITIVE, "tau": POSITIVE, "beta_1": DECAY, "beta_2": DECAY},
    "FedProx": {"proximal_mu": NONNEGATIVE},
    "FedTrimmedAvg": {"beta": (0, 0.5, False, True)},
    "Krum": {"num_malicious_nodes": NONNEGATIVE, "num_malicious_clients": NONNEGATIVE},
    "MultiKrum": {"num_malicious_nodes": NONNEGATIVE, "num_nodes_to_select": (1, math.inf, False, True)},
    "Bulyan": {"num_malicious_nodes": NONNEGATIVE},
    "DifferentialPrivacyServerSideFixedClipping": _DP_FIXED, "DifferentialPrivacyClientSideFixedClipping": _DP_FIXED,
    "DPFedAvgFixed": _DP_FIXED, "DifferentialPrivacyServerSideAdaptiveClipping": _DP_ADAPTIVE,
    "DifferentialPrivacyClientSideAdaptiveClipping": _DP_ADAPTIVE, "DPFedAvgAdaptive": _DP_ADAPTIVE,
}


def ranges_of(cls: type) -> dict:
    """``{argument: (low, high, low_open, high_open)}`` of a strategy class: :data:`RANGES` of the Flower
    classes among its bases, the nearest first."""
    out: dict = {}
    for base in reversed(cls.__mro__):
        if base.__module__.startswith("flwr.") and base.__name__ in RANGES:
            out.update(RANGES[base.__name__])
    return out


@dataclasses.dataclass(frozen=True)
class FlowerParams(HParams):
    """Base of the generated hyperparameter dataclasses: coerces and checks every field by its ``kind``."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = _coerce(type(self).label, f, getattr(self, f.name))
            if f.metadata["kind"] == "strategy" and value is not None:
                _check_inner(type(self), value)
            object.__setattr__(self, f.name, value)

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
    wanted = str if kind == "strategy" else {v: k for k, v in KINDS.items()}[kind]
    if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
        allowed = "the name of a Flower strategy" if kind == "strategy" else kind
        raise ConfigError(f"invalid hp {f.name}={value!r} for {label}: expected {allowed}"
                          + (" or none" if optional else ""))
    if kind in ("int", "float"):
        _check_range(label, f.name, value, f.metadata["range"])
    return value


def _check_inner(params_cls: type, spec: str) -> None:
    """A wrapper's inner strategy ``spec`` exists and speaks the wrapper's API (a legacy wrapper calls
    ``configure_fit``, which a Message-API strategy does not have, and the other way round)."""
    from stabkit.algorithms.flower.strategies import is_legacy, strategy_class

    outer, inner = params_cls.strategy_cls, strategy_class(params_cls.label, spec)
    if is_legacy(inner) != is_legacy(outer):
        api = {True: "a legacy flwr.server.strategy", False: "a Message-API flwr.serverapp.strategy"}
        raise ConfigError(f"invalid hp strategy={spec!r} for {params_cls.label}: {outer.__name__} is "
                          f"{api[is_legacy(outer)]} wrapper and needs an inner strategy of the same API; "
                          f"{inner.__name__} is {api[is_legacy(inner)]} (give package.module:Class of the other one)")


def _check_range(label: str, name: str, value, bounds) -> None:
    """A finite number, inside ``bounds`` (``(low, high, low_open, high_open)``, None: any finite number)."""
    low, high, low_open, high_open = bounds or (-math.inf, math.inf, True, True)
    inside = math.isfinite(value) and (value > low if low_open else value >= low) and \
        (value < high if high_open else value <= high)
    if not inside:
        text = ("a finite number" if bounds is None else
                f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}")
        raise ConfigError(f"invalid hp {name}={value!r} for {label}: {text}")


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
    fields, ranges = [], ranges_of(cls)
    for p in list(inspect.signature(cls).parameters.values()):
        if p.name in SAMPLING or p.name in KEYS or p.name in EVALUATION or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        typed = _kind(hints.get(p.name, p.annotation))
        required = p.default is inspect.Parameter.empty
        if typed is None and required:
            raise ConfigError(f"invalid algo={label!r}: its constructor needs {p.name}, whose type "
                              f"{p.annotation!r} cannot be given as --hp")
        if typed is not None:
            meta = dict(kind=typed[0], optional=typed[1], doc=f"{cls.__name__}'s {p.name}", range=ranges.get(p.name))
            fields.append((p.name, object, dataclasses.field(default=REQUIRED if required else p.default,
                                                               metadata=meta)))
    made = dataclasses.make_dataclass(f"{cls.__name__}Params", fields, bases=(FlowerParams,), frozen=True)
    made.label, made.strategy_cls = label, cls
    return made
