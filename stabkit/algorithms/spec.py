"""One algorithm specification, ``AlgoSpec(base, hp, wrappers)``: what a run says about its algorithm, parsed once.

A run names its algorithm on several surfaces: ``--algo NAME`` or a variant ``NAME[KEY=VALUE,...]``, ``--hp``
(or a config file's, a preset's or a sweep row's ``hp``), ``--wrap dp:KEY=VALUE,...`` and relaxed
initialisation (``--ri-beta``, ``--ri-aggregation``). :meth:`AlgoSpec.parse` reads them together, every value
with the one ``KEY=VALUE`` reader (:mod:`stabkit.keyvalue`), into the base algorithm's name, its
hyperparameters (the variant's fixed values and the given ones; a contradiction is one line) and the ordered
list of wrappers around it, innermost first (:data:`stabkit.algorithms.wrap.WRAPPERS` gives the order);
:func:`stabkit.algorithms.compose` builds the algorithm from it. ``config.json`` records it whole as
``algo_spec`` (:meth:`AlgoSpec.to_dict`), and :meth:`AlgoSpec.from_dict` reads it back to the same spec.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from stabkit.algorithms.variant import merged_hp
from stabkit.algorithms.wrap import WRAPPERS, parse_wrap, wrapper_values
from stabkit.errors import ConfigError, require


@dataclass(frozen=True)
class AlgoSpec:
    """The base algorithm's name (a built-in, ``flwr:...`` or ``package.module:Class``; no variant brackets),
    its hyperparameters as given (defaults not filled in) and its wrappers ``((name, {key: value}), ...)``,
    innermost first."""

    base: str
    hp: dict = field(default_factory=dict)
    wrappers: tuple = ()

    def __post_init__(self):
        require(isinstance(self.base, str) and self.base and "[" not in self.base, "algo_spec base", self.base,
                "an algorithm name without a variant's brackets (AlgoSpec.parse reads NAME[KEY=VALUE,...])")
        require(isinstance(self.hp, dict), "algo_spec hp", self.hp, "a mapping of hyperparameter names to values")
        wrappers = tuple((name, wrapper_values(name, values, f"{name}:{values}")) for name, values in
                         (_wrapper_item(item) for item in self.wrappers))
        names = [name for name, _ in wrappers]
        require(names == sorted(set(names), key=list(WRAPPERS).index), "algo_spec wrappers", names,
                f"each wrapper once, innermost first in the order {', '.join(WRAPPERS)}")
        object.__setattr__(self, "hp", dict(self.hp))
        object.__setattr__(self, "wrappers", wrappers)

    @classmethod
    def parse(cls, algo: str, hp: Optional[dict] = None, wrap: Optional[str] = None, ri_beta: float = 0.0,
              ri_aggregation: str = "model_avg") -> "AlgoSpec":
        """The spec of ``--algo algo --hp ... --wrap wrap --ri-beta ri_beta --ri-aggregation ri_aggregation``
        (relaxed initialisation is a wrapper when ``ri_beta`` is not 0)."""
        base, hp = merged_hp(algo, hp)
        ri = [("ri", {"beta": ri_beta, "aggregation": ri_aggregation})] if ri_beta else []
        dp = [parse_wrap(wrap)] if wrap is not None else []
        return cls(base, hp, tuple(ri + dp))

    def to_dict(self) -> dict:
        """``{"base": ..., "hp": {...}, "wrappers": [[name, {...}], ...]}``: what config.json records."""
        return {"base": self.base, "hp": dict(self.hp),
                "wrappers": [[name, dict(values)] for name, values in self.wrappers]}

    @classmethod
    def from_dict(cls, d: dict) -> "AlgoSpec":
        """The spec :meth:`to_dict` wrote (a bad one is one line)."""
        require(isinstance(d, dict) and set(d) == {"base", "hp", "wrappers"}, "algo_spec", d,
                "a mapping with the keys base, hp and wrappers")
        require(isinstance(d["wrappers"], list), "algo_spec wrappers", d["wrappers"], "a list of [name, {...}]")
        return cls(d["base"], d["hp"], tuple(d["wrappers"]))


def _wrapper_item(item) -> tuple:
    ok = isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], dict)
    if not ok or item[0] not in WRAPPERS:
        raise ConfigError(f"invalid algo_spec wrapper {item!r}: [name, {{key: value}}] with a name among "
                          f"{', '.join(WRAPPERS)}")
    return item[0], item[1]


__all__ = ["AlgoSpec"]
