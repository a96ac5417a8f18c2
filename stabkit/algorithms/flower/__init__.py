"""Flower strategies as stabkit algorithms: ``--algo flwr:NAME`` (a class of ``flwr.serverapp.strategy``) or
``--algo flwr:package.module:Class`` (a user's own strategy: Message API, or a legacy
``flwr.server.strategy.Strategy``).

A strategy's server rule runs unchanged, in-process and without a network, on the clients stabkit trains in its
batched engine (FedAvg's local SGD; FedProx's proximal term when the strategy sends ``proximal-mu``):

* :mod:`.strategies` finds the strategy class; :mod:`.params` types its constructor arguments (``--hp``) from
  its signature and sets the sampling arguments so that it trains exactly the cohort stabkit sampled;
* :mod:`.inprocess` drives one strategy through one round (``configure_train``, the replies,
  ``aggregate_train``) with Flower's global generators seeded from stabkit's coupled streams; :mod:`.legacy`
  does the same with the same functions for a legacy strategy (``configure_fit``, ``aggregate_fit``);
  :mod:`.arrays` makes the Flower Arrays of the messages (and reads the aggregate back) byte for byte as Flower
  does, without its per-array ``.npy`` header work;
* :mod:`.bridge` is the :class:`~stabkit.algorithms.base.Algorithm` that holds one strategy per trajectory
  of every pair and carries it through the rounds (and through checkpoints).

Flower is an optional extra (``pip install -e ".[flower]"``): nothing here imports it until a ``flwr:`` name
is resolved.
"""
from __future__ import annotations

from stabkit.algorithms.flower.strategies import PREFIX
from stabkit.extras import require_extra

_CLASSES: dict = {}  # --algo name -> its bridge class (one class per name, as for every other algorithm)


def is_flower(name) -> bool:
    """``name`` names a Flower strategy (``flwr:...``)."""
    return isinstance(name, str) and name.startswith(PREFIX)


def flower_class(name: str) -> type:
    """The :class:`~stabkit.algorithms.flower.bridge.FlowerStrategy` subclass of ``--algo name`` (Flower missing:
    one line naming its install command, also for a name resolved before)."""
    require_extra("flower")
    if name not in _CLASSES:
        from stabkit.algorithms.flower.bridge import bridge_class

        _CLASSES[name] = bridge_class(name)
    return _CLASSES[name]


def check_strategy(spec, s: int) -> None:
    """Build the strategy an :class:`~stabkit.algorithms.spec.AlgoSpec` names for ``s`` clients per round, before
    the run (and before torch): what its constructor refuses, and a robust aggregator given too few clients, is
    one line now."""
    if is_flower(spec.base):
        import numpy as np

        flower_class(spec.base).from_hp(spec.hp).make_strategy(s, np.zeros(1, np.float32))
