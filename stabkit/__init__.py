"""stabkit: measure the stability and generalisation of federated-learning algorithms with paired runs.

Python API: ``RunConfig`` + ``run_pair`` run a paired experiment and write a run directory;
``load_run`` reads its metrics back as a pandas DataFrame.

The names are imported on first use (PEP 562), so ``import stabkit.errors`` or a light command
(``stabkit --help``, ``stabkit algos``) does not pay for torch and pandas.
"""
from stabkit.lazy import lazy_getattr

# Importing stabkit changes no environment variable or process-wide setting: the machine policy (huge pages,
# the allocator) is applied by the command line and sweep workers, or by a library user (stabkit.engine.machine).

__version__ = "0.1.0"

_EXPORTS = {"RunConfig": "stabkit.config.runconfig", "ConfigError": "stabkit.errors",
            "PairedRun": "stabkit.run.experiment", "run_pair": "stabkit.run.experiment",
            "load_local": "stabkit.store.runstore", "load_run": "stabkit.store.runstore",
            "TaskOptions": "stabkit.config.taskoptions"}
__all__ = sorted(_EXPORTS) + ["__version__"]

__getattr__ = lazy_getattr(globals(), _EXPORTS)


def __dir__():
    return __all__
