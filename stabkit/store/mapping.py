"""Reading a mapping from a file: run configs, sweep specs and the JSON files of a run directory.

One reader for every YAML (``.yaml``/``.yml``) or JSON file stabkit reads a mapping from, so that a missing,
unparsable or non-mapping file is refused the same way everywhere: one :class:`~stabkit.errors.ConfigError`
line naming the option (or file) and the file, and what was expected. A key given twice in one mapping (YAML
or JSON) is refused, as on the command line: the last one silently winning is what a second key never means.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from stabkit.errors import ConfigError


class DuplicateKey(ValueError):
    """A mapping in a file gives one key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise DuplicateKey(f"key {key!r} is given twice (line {key_node.start_mark.line + 1}); give it once")
            seen.add(key)
        return super().construct_mapping(node, deep)


def _unique_pairs(pairs: list) -> dict:
    keys = [k for k, _ in pairs]
    twice = next((k for k in keys if keys.count(k) > 1), None)
    if twice is not None:
        raise DuplicateKey(f"key {twice!r} is given twice; give it once")
    return dict(pairs)



def read_mapping(path, field: str, what: str, hint: str = "") -> dict:
    """The mapping in the YAML or JSON file ``path`` (any suffix other than .yaml/.yml is read as JSON). A
    missing, unparsable or non-mapping file raises ``invalid FIELD='PATH': ...`` naming ``what`` was expected;
    ``hint`` (e.g. how to repair it) follows an unparsable file's message."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"invalid {field}={str(path)!r}: no such file (expected a .yaml/.yml/.json {what})")
    fmt = "yaml" if p.suffix in (".yaml", ".yml") else "json"
    try:
        text = p.read_text()
        data = yaml.load(text, Loader=_UniqueKeyLoader) if fmt == "yaml" else \
            json.loads(text, object_pairs_hook=_unique_pairs)
    except DuplicateKey as e:
        raise ConfigError(f"invalid {field}={str(path)!r}: {e}") from None
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as e:
        detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(f"invalid {field}={str(path)!r}: not valid {fmt} ({detail}){hint}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"invalid {field}={str(path)!r}: expected a mapping in the {what}, got "
                          f"{type(data).__name__}")
    return data
