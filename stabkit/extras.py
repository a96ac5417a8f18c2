"""The optional extras: what not every user needs, installed from the checkout as stabkit itself is (README):
``pip install -e ".[NAME]"``.

One table says which import each extra brings and how to install it, so that every feature behind an extra
refuses in the same one line (a :class:`~stabkit.errors.ConfigError`, exit status 2 on the command line) when
its package is missing, before anything is started or written.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from stabkit.errors import ConfigError

#: extra name -> (the module it provides, what it is for)
EXTRAS = {
    "flower": ("flwr", "Flower strategies and apps"),
    "privacy": ("dp_accounting", "differential-privacy accounting"),
    "tensorboard": ("tensorboard", "TensorBoard logging"),
    "docs": ("mkdocs", "building the documentation site"),
    "ray": ("ray", "sweeps and atlases on a Ray cluster (--executor ray)"),
    "parquet": ("pyarrow", "parquet tables (stabkit report --table-format parquet)"),
}


def install_command(extra: str) -> str:
    """The command that installs ``extra`` (stabkit is installed from its source checkout, as the README says)."""
    return f'pip install -e ".[{extra}]" (in the stabkit checkout)'


def require_extra(extra: str) -> ModuleType:
    """Import the module behind ``extra``, or raise one line naming the feature and its install command."""
    module, purpose = EXTRAS[extra]
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"{purpose} need the optional package {module!r}, which is not installed: "
                          f"{install_command(extra)}") from None
