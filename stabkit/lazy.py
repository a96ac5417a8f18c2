"""Names of a package imported on first use (PEP 562): ``stabkit`` and ``stabkit.sweep`` export classes whose
modules import torch and pandas, and a light command (``stabkit --help``) must not pay for them."""
import importlib


def lazy_getattr(package: dict, exports: dict):
    """A module ``__getattr__`` for the package whose ``globals()`` is ``package``: name -> defining module in
    ``exports``; the value is imported on first access and cached in the package."""
    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {package['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        package[name] = value
        return value

    return __getattr__
