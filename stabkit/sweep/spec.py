"""Sweep specs: a base run configuration plus axes to vary, expanded into validated jobs up front.

A spec is a mapping (YAML/JSON file or built from the CLI shorthand)::

    name: libra-k                      # optional, used in figure titles
    base: {algo: fedavg, task: synthetic, rounds: 40}
    product: {local_steps: [1, 5, 20], seed: [0, 1]}    # every combination
    zip: {algo: [fedavg, fosm], hp.beta: [null, 0.9]}    # varied together (equal lengths)

Keys are those of a run's ``config.json`` (task options may be given flat, as for ``stabkit pair
--config``); ``hp.NAME`` sets one algorithm hyperparameter. A zip entry whose value is ``null`` leaves the
key unset. Every job is built through :meth:`RunConfig.from_dict` and its algorithm through ``compose`` (from
the job's ``RunConfig.algo_spec``) before anything runs, so a bad value gets exactly the message ``stabkit pair``
gives, followed by the job it occurs in. The axis named ``seed`` is the replicate axis of the report.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from stabkit.algorithms import compose
from stabkit.config.runconfig import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError, require
from stabkit.store.mapping import read_mapping

SPEC_KEYS = ("name", "base", "product", "zip")
MAX_JOBS = 20_000  # jobs in one sweep at most (SweepSpec.jobs)
HP_PREFIX = "hp."


def config_keys() -> set:
    """Keys a base or an axis may set (RunConfig fields, flat task options, ``data_seed``)."""
    run = {f.name for f in dataclasses.fields(RunConfig)} - {"task_options"}
    task = {f.name for f in dataclasses.fields(TaskOptions)} - {"seed"}
    return run | task | {"data_seed"}


@dataclass(frozen=True)
class Job:
    """One paired run of the sweep: its id (directory name), the swept values and the full config."""

    id: str
    params: dict  # axis -> value for this job
    config: dict  # RunConfig.to_dict() of the job

    @property
    def config_hash(self) -> str:
        return config_hash(self.config)


def config_hash(config: dict) -> str:
    """The hash that identifies a job by its run config (``RunConfig.to_dict()``, as in its config.json)."""
    return _hash(config)


@dataclass(frozen=True)
class SweepSpec:
    """A validated sweep: base config, product axes, zipped axes."""

    name: str
    base: dict
    product: dict
    zip: dict

    @property
    def axes(self) -> list:
        """Swept keys in spec order (zipped axes first)."""
        return list(self.zip) + list(self.product)

    def to_dict(self) -> dict:
        return {"name": self.name, "base": self.base, "product": self.product, "zip": self.zip}

    @property
    def hash(self) -> str:
        return _hash(self.to_dict())

    def size(self) -> int:
        """How many jobs the spec expands to (counted, not expanded)."""
        rows = min((len(v) for v in self.zip.values()), default=1)
        return rows * math.prod(len(v) for v in self.product.values())

    def jobs(self) -> list:
        """All jobs, each validated as ``stabkit pair`` validates a run; a spec of more than ``MAX_JOBS`` jobs is
        refused before any is made (each is validated and tracked in the manifest: a million of them would take
        hours to check before the first one runs)."""
        require(self.size() <= MAX_JOBS, "sweep", f"{self.size():,} jobs", f"at most {MAX_JOBS:,} jobs in one sweep "
                "(fewer seeds or axis values; split it into several sweeps)")
        zipped = list(zip(*self.zip.values())) if self.zip else [()]
        jobs, seen = [], set()
        for z in zipped:
            for p in itertools.product(*self.product.values()):
                params = dict(zip(self.zip, z)) | dict(zip(self.product, p))
                job = _make_job(self.base, params)
                require(job.id not in seen, "sweep", job.id, "axes must give distinct jobs (a duplicated value?)")
                seen.add(job.id)
                jobs.append(job)
        return jobs


def parse_spec(data, source: str = "spec") -> SweepSpec:
    """Check the shape of a spec mapping (one-line errors) and return it; jobs are validated by ``jobs()``."""
    require(isinstance(data, dict), source, type(data).__name__, "a mapping with keys " + ", ".join(SPEC_KEYS))
    unknown = sorted(set(data) - set(SPEC_KEYS))
    require(not unknown, "sweep key", unknown[0] if unknown else None, f"one of {', '.join(SPEC_KEYS)}")
    base = data.get("base") or {}
    require(isinstance(base, dict), "base", base, "a mapping of config keys to values")
    for key in base:
        _check_key(key, "base key")
    axes = {}
    for kind in ("product", "zip"):
        block = data.get(kind) or {}
        require(isinstance(block, dict), kind, block, "a mapping of axis names to lists of values")
        for key, values in block.items():
            _check_key(key, "axis")
            require(key not in axes, "axis", key, "appears in both product and zip; give it once")
            require(isinstance(values, list), f"axis {key}", values, "a list of values")
            require(len(values) > 0, f"axis {key}", values, "a non-empty list of values")
            axes[key] = kind
    zipped = data.get("zip") or {}
    lengths = {k: len(v) for k, v in zipped.items()}
    require(len(set(lengths.values())) <= 1, "zip", lengths, "zipped axes must have equal lengths")
    require(bool(axes), source, "no axes", "give at least one axis under product or zip")
    name = str(data.get("name") or "sweep")
    return SweepSpec(name=name, base=dict(base), product=dict(data.get("product") or {}), zip=dict(zipped))


def load_spec(path) -> SweepSpec:
    """Read a YAML/JSON sweep spec file."""
    data = read_mapping(path, "spec", "sweep spec")
    return parse_spec(data, source=f"spec {Path(path).name}")


def _check_key(key, what: str) -> None:
    if isinstance(key, str) and key.startswith(HP_PREFIX) and len(key) > len(HP_PREFIX):
        return
    keys = config_keys()
    require(key in keys, what, key, f"a config key ({', '.join(sorted(keys))}) or hp.NAME")


def _make_job(base: dict, params: dict) -> Job:
    values = {k: v for k, v in base.items() if not k.startswith(HP_PREFIX)}
    hp = values.get("hp") or {}
    require(isinstance(hp, dict), "hp", hp, "a mapping of hyperparameter names to values, e.g. {beta: 0.9}")
    values["hp"] = dict(hp)
    for key, value in [*((k, v) for k, v in base.items() if k.startswith(HP_PREFIX)), *params.items()]:
        if key.startswith(HP_PREFIX):
            if value is not None:
                values["hp"][key[len(HP_PREFIX):]] = value
        elif value is not None:
            values[key] = value
    job_id = _job_id(params)
    try:
        cfg = RunConfig.from_dict(values)
        compose(cfg.algo_spec)
    except ConfigError as e:
        raise ConfigError(f"{e} (sweep job {job_id})") from None
    return Job(id=job_id, params=dict(params), config=cfg.to_dict())


def _job_id(params: dict) -> str:
    """A readable directory name from the swept values (hashed when too long)."""
    text = ",".join(f"{k}={_short(v)}" for k, v in params.items())
    text = re.sub(r"[^A-Za-z0-9_.,=+-]", "_", text)
    return text if len(text) <= 100 else f"{text[:80]}~{_hash(params)[:10]}"


def _short(v) -> str:
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v)


def _hash(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()
