"""The fingerprint of a paired experiment: the values of every config field that defines it.

A checkpoint records the fingerprint of the run that wrote it; a resume compares it with the run's
``config.json`` and refuses a changed experiment with one line naming the changed fields (an edited
``algo``, ``lr`` or ``perturb`` would otherwise continue the logs with another experiment's rounds, and the
curves would mix the two with nothing to show it). Every field defines the experiment except
``SAFE_TO_CHANGE``: how long the run goes on and what it writes on the way, and where it computes.
"""
from __future__ import annotations

import json

from stabkit.config.runconfig import RunConfig
from stabkit.store.atomic import strict_json

SAFE_TO_CHANGE = ("rounds", "checkpoint_every", "save_models", "constants", "device", "store_updates")
"""Fields a resume may change: the horizon (``rounds``), the checkpoint interval, the rounds whose models
are saved, whether constants are estimated at the end, the device the remaining rounds run on, and whether
client updates are stored (runs from before the option resume as they were)."""


def fingerprint(cfg: RunConfig) -> dict:
    """``{field: value}`` of every experiment-defining field of ``cfg`` (task options flat, under their
    option names: ``data_seed`` for the data seed), as JSON values so that it survives a round trip."""
    values = json.loads(strict_json(cfg.to_dict()))
    task = values.pop("task_options")
    values.update({("data_seed" if k == "seed" else k): v for k, v in task.items()})
    return {k: v for k, v in sorted(values.items()) if k not in SAFE_TO_CHANGE}


def changed_fields(recorded: dict, cfg: RunConfig) -> list:
    """``["algo ('fedavg' -> 'fedprox')", ...]``: the fields whose value in ``cfg`` differs from the
    fingerprint ``recorded`` (a field only one side has counts as changed)."""
    now = fingerprint(cfg)
    return [f"{k} ({recorded.get(k)!r} -> {now.get(k)!r})" for k in sorted(set(recorded) | set(now))
            if recorded.get(k, _ABSENT) != now.get(k, _ABSENT)]


_ABSENT = object()
