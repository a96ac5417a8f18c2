"""Legend labels of runs plotted together: the algorithm plus what differs between the runs.

Three FedAvg runs with different learning rates are all "fedavg" by algorithm; :func:`distinct_labels`
names each by the configuration values that differ between the runs shown (``fedavg lr=0.1``), reading
the runs' ``config.json``. A label given by the user (``stabkit pair --label``, ``stabkit bounds
RUN=LABEL``) is kept as it is.
"""
from __future__ import annotations

import math

# config.json entries that describe the run's circumstances, not its setting, and ``algo_spec``, which restates
# the ``algo``, ``hp``, ``ri_beta`` and ``wrap`` entries the labels read
IGNORED = ("versions", "device_used", "d", "n_min", "label", "device", "hp_resolved", "algo_spec")


def _flat(config: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in config.items():
        if key in IGNORED and not prefix:
            continue
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = tuple(value) if isinstance(value, list) else value
    return out


def _short(key: str) -> str:
    return key.split(".", 1)[1] if key.startswith(("hp.", "task_options.")) else key


def distinct_labels(configs: list) -> list:
    """One label per config: ``algo`` then ``key=value`` for every setting not equal across ``configs``."""
    flats = [_flat(c) for c in configs]
    keys = sorted({k for f in flats for k in f} - {"algo"})
    differ = [k for k in keys if len({repr(f.get(k)) for f in flats}) > 1]
    labels = []
    for f in flats:
        parts = [f"{_short(k)}={value_text(f.get(k))}" for k in differ]
        labels.append(" ".join([str(f.get("algo", "run"))] + parts))
    return labels


def value_text(v) -> str:
    """A configuration value as legends and tables show it: unset (None or NaN) is ``default``, a sequence
    ``a,b``, a float in ``g`` format (``0.1``, ``1e-05``), anything else as ``str``. The one formatter of
    swept values (``stabkit.atlas.names`` uses it too)."""
    if v is None or isinstance(v, float) and math.isnan(v):
        return "default"
    if isinstance(v, (tuple, list)):
        return ",".join(map(str, v))
    return f"{v:g}" if isinstance(v, float) else str(v)
