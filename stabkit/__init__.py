"""stabkit: measure the stability and generalisation of federated-learning algorithms with paired runs.

Python API: ``RunConfig`` + ``run_pair`` run a paired experiment and write a run directory;
``load_run`` reads its metrics back as a pandas DataFrame.
"""
__version__ = "0.1.0"

from stabkit.run.config import RunConfig  # noqa: E402
from stabkit.errors import ConfigError  # noqa: E402
from stabkit.run.experiment import PairedRun, run_pair  # noqa: E402
from stabkit.run.runstore import load_local, load_run  # noqa: E402
from stabkit.tasks.options import TaskOptions  # noqa: E402

__all__ = ["ConfigError", "PairedRun", "RunConfig", "TaskOptions", "load_local", "load_run", "run_pair",
           "__version__"]
