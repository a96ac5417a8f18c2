"""Algorithms that are the same update at their default hyperparameters, shown once in the atlas.

FedAvgM is FOSM with ν = 1, and FOSM's default ν is 1: at their defaults the two run bit for bit the same
trajectories, so an atlas listing both would rank one method twice. ``tests/atlas/test_atlas_aliases.py`` finds
such pairs by running every built-in algorithm at its defaults and comparing the models after each round
(not by name), and checks that this table lists exactly the pairs it finds.
"""
from __future__ import annotations

# kept algorithm -> (the algorithm it equals at the defaults, the label's note)
ALIASES = {"fedavgm": ("fosm", "FOSM, ν = 1")}


def fold_aliases(names: list) -> tuple:
    """``(names without the duplicates, [(dropped, kept), ...])``: an algorithm is dropped when the one it
    equals at the defaults is also named (the kept one is labelled with both)."""
    dropped = {twin: kept for kept, (twin, _) in ALIASES.items() if kept in names and twin in names}
    return [n for n in names if n not in dropped], list(dropped.items())


def alias_note(algo: str) -> str:
    """`` (= FOSM, ν = 1)`` for an algorithm with a twin at the defaults, else ``""``."""
    return f" (= {ALIASES[algo][1]})" if algo in ALIASES else ""
