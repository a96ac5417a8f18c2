"""Reading a mapping from a file: run configs, sweep specs and the JSON files of a run directory.

One reader for every YAML (``.yaml``/``.yml``) or JSON file stabkit reads a mapping from, so that a missing,
unparsable or non-mapping file is refused the same way everywhere: one :class:`~stabkit.errors.ConfigError`
line naming the option (or file) and the file, and what was expected.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from stabkit.errors import ConfigError


def read_mapping(path, field: str, what: str, hint: str = "") -> dict:
    """The mapping in the YAML or JSON file ``path`` (any suffix other than .yaml/.yml is read as JSON). A
    missing, unparsable or non-mapping file raises ``invalid FIELD='PATH': ...`` naming ``what`` was expected;
    ``hint`` (e.g. how to repair it) follows an unparsable file's message."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"invalid {field}={str(path)!r}: no such file (expected a .yaml/.yml/.json {what})")
    fmt = "yaml" if p.suffix in (".yaml", ".yml") else "json"
    try:
        data = yaml.safe_load(p.read_text()) if fmt == "yaml" else json.loads(p.read_text())
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as e:
        detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"invalid {field}={str(path)!r}: not valid {fmt} ({detail}){hint}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {field}={str(path)!r}: expected a mapping in the {what}, got "
                          f"{type(data).__name__}")
    return data
