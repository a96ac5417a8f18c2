"""stabkit: measure the stability and generalisation of federated-learning algorithms with paired runs.

Python API: ``RunConfig`` + ``run_pair`` run a paired experiment and write a run directory;
``load_run`` reads its metrics back as a pandas DataFrame.

The names are imported on first use (PEP 562), so ``import stabkit.errors`` or a light command
(``stabkit --help``, ``stabkit algos``) does not pay for torch and pandas.
"""
import os

from stabkit.lazy import lazy_getattr

# Large CPU tensors in transparent huge pages (torch reads this at its first allocation of 2 MB or more, so it
# is set before any; a value the user set stands): see stabkit.engine.alloc.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

__version__ = "0.1.0"

_EXPORTS = {"RunConfig": "stabkit.config.runconfig", "ConfigError": "stabkit.errors",
            "PairedRun": "stabkit.run.experiment", "run_pair": "stabkit.run.experiment",
            "load_local": "stabkit.store.runstore", "load_run": "stabkit.store.runstore",
            "TaskOptions": "stabkit.config.taskoptions"}
__all__ = sorted(_EXPORTS) + ["__version__"]

__getattr__ = lazy_getattr(globals(), _EXPORTS)


def __dir__():
    return __all__
