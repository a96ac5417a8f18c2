"""Closed-form stability and excess-risk bounds of the four papers, as per-round recursions.

Importing the package imports every module in it, which registers its bounds
(``stabkit.analysis.bounds.base.register``).
"""
import importlib
import pkgutil

from stabkit.analysis.bounds.base import Bound, Setting, bounds_for, iterate, register, registered

for _info in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_info.name}")

__all__ = ["Bound", "Setting", "bounds_for", "iterate", "register", "registered"]
