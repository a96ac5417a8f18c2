"""Registry of FL algorithms: ``ALGORITHMS[name]`` is the class; ``build_algorithm`` validates."""
from stabkit.algorithms.base import Algorithm, HParams, RoundContext
from stabkit.algorithms.fedavg import FedAvg
from stabkit.algorithms.fedprox import FedProx
from stabkit.algorithms.fedsagd import FedSAGD
from stabkit.errors import ConfigError

ALGORITHMS = {cls.name: cls for cls in (FedAvg, FedProx, FedSAGD)}


def build_algorithm(name: str, hp: dict | None = None) -> Algorithm:
    """The algorithm ``name`` with hyperparameters ``hp`` (defaults for the rest)."""
    if name not in ALGORITHMS:
        raise ConfigError(f"invalid algo={name!r}: one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name].from_hp(hp or {})


__all__ = ["ALGORITHMS", "Algorithm", "HParams", "RoundContext", "build_algorithm"]
