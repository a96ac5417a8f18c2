"""Plug-ins: algorithms, models, tasks and bounds that live outside the stabkit package.

A plug-in is named in one of two ways wherever a built-in name is accepted (``--algo``, ``--model``,
``--task``, ``stabkit unlearn --method``, a sweep spec, ``RunConfig``):

* an **import path** ``package.module:attribute`` (the current directory is importable, as for
  ``python -m``), e.g. ``--algo myalgo:FedYogi`` next to ``myalgo.py``;
* the name of an **entry point** an installed distribution declares in one of the groups of
  :data:`GROUPS`, e.g. in its ``pyproject.toml``::

      [project.entry-points."stabkit.algorithms"]
      fedyogi = "stabkit_fedyogi.algorithm:FedYogi"

Both are resolved by name in whatever process needs the object (a sweep's process-pool workers and
Ray tasks import the plug-in themselves; nothing relies on a registry edited in another process). Every
failure — a module that does not exist, a missing attribute, an import that raises — is one
:class:`~stabkit.errors.ConfigError` line naming the plug-in.
"""
from __future__ import annotations

import importlib
import os
import sys
from importlib import metadata

from stabkit.errors import ConfigError

GROUPS = {"algo": "stabkit.algorithms", "model": "stabkit.models", "task": "stabkit.tasks",
          "bound": "stabkit.bounds", "unlearn": "stabkit.unlearning"}


def is_import_path(name) -> bool:
    """``module:attribute`` (as opposed to a registered or entry-point name)."""
    return isinstance(name, str) and ":" in name


_WARNED: set = set()  # (group, entry-point name, error) already reported


def warn_broken(kind: str, name: str, error: Exception) -> None:
    """Say once on stderr that the installed entry point ``name`` of ``kind`` is skipped and why: one
    broken third-party plug-in must not break listings and analyses that do not need it."""
    key = (GROUPS[kind], name, str(error))
    if key not in _WARNED:
        _WARNED.add(key)
        print(f"warning: skipping the {GROUPS[kind]} entry point {name!r}: {error}", file=sys.stderr)


def installed(kind: str) -> dict:
    """``{name: EntryPoint}`` of the installed plug-ins of ``kind`` (a key of :data:`GROUPS`)."""
    return {ep.name: ep for ep in sorted(metadata.entry_points(group=GROUPS[kind]), key=lambda e: e.name)}


def load(kind: str, name: str):
    """The object behind ``name``: an import path ``module:attribute`` or an installed entry point."""
    if is_import_path(name):
        return _import(kind, name, name)
    ep = installed(kind).get(name)
    if ep is None:
        raise KeyError(name)
    return _import(kind, name, ep.value)


def resolve(kind: str, name: str, builtin, form: str):
    """:func:`load`, where an unknown plain name is a ConfigError listing the ``builtin`` and installed
    names and the import-path ``form`` (e.g. ``package.module:Class``)."""
    try:
        return load(kind, name)
    except KeyError:
        allowed = ", ".join([*builtin, *installed(kind)])
        raise ConfigError(f"invalid {kind}={name!r}: one of {allowed}, or an import path {form}") from None


def _import(kind: str, name: str, target: str):
    module_name, colon, attr = target.partition(":")
    where = f"{kind}={name!r}" + ("" if target == name else f" (entry point {GROUPS[kind]} -> {target})")
    if not module_name or (colon and not attr):
        raise ConfigError(f"invalid {where}: an import path must read package.module:attribute")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())  # a plug-in module next to the user's files, as with `python -m`
    try:
        obj = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ConfigError(f"invalid {where}: no module named {e.name!r}") from None
    except ConfigError:  # e.g. a bound with the wrong signature, registered while the module loads
        raise
    except Exception as e:  # the plug-in's own module raised while importing
        raise ConfigError(f"invalid {where}: importing {module_name} raised {describe_error(e)}") from None
    for part in attr.split(".") if attr else ():  # an entry point may name a whole module
        if not hasattr(obj, part):
            raise ConfigError(f"invalid {where}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def call(kind: str, name: str, factory, *args):
    """``factory(*args)``; whatever it raises becomes one ConfigError line naming the plug-in."""
    try:
        return factory(*args)
    except ConfigError:
        raise
    except Exception as e:
        raise ConfigError(f"invalid {kind}={name!r}: the plug-in raised {describe_error(e)}") from None


def import_path_of(obj) -> str | None:
    """``module:qualname`` of a module-level function or class (None for lambdas, locals, instances)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    return f"{module}:{qualname}"


def describe_error(e: Exception) -> str:
    """``Type: first line of the message``, for one-line errors about a plug-in."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
