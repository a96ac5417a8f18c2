"""Sweeps: grids of paired runs (spec, one job each: job), their state (manifest), one sweep per directory
at a time (lock), where they run (executors, which check each job on its data before any runs: jobcheck; the GPUs and CPUs each job holds and where it ran: placement; the
tasks' arrays sent through Ray's object store: shipping), the driver (runner) and the combined tables and figures
(report), and each finished job's TensorBoard events (tensorboard). The names are imported on first use (PEP 562), so the CLI's start-up does not import torch through
them.
"""
from stabkit.lazy import lazy_getattr

REPORT_FORMATS = ("csv", "parquet")  # tidy-table formats of ``stabkit report`` (stabkit.sweep.report)
EXECUTORS = ("local", "ray")  # where a sweep's jobs run (stabkit.sweep.executors); here, light for the CLI's choices

_EXPORTS = {"make_executor": "stabkit.sweep.executors", "read_manifest": "stabkit.sweep.manifest",
            "run_sweep": "stabkit.sweep.runner", "Job": "stabkit.sweep.spec", "SweepSpec": "stabkit.sweep.spec",
            "load_spec": "stabkit.sweep.spec", "parse_spec": "stabkit.sweep.spec"}
__all__ = ["EXECUTORS", "REPORT_FORMATS", *sorted(_EXPORTS)]

__getattr__ = lazy_getattr(globals(), _EXPORTS)
