"""Sweeps: grids of paired runs (spec), their state (manifest), where they run (executors), the driver
(runner) and the combined tables and figures (report)."""
REPORT_FORMATS = ("csv", "parquet")  # tidy-table formats of ``stabkit report`` (stabkit.sweep.report)

from stabkit.sweep.executors import make_executor  # noqa: E402
from stabkit.sweep.manifest import read_manifest  # noqa: E402
from stabkit.sweep.runner import run_sweep  # noqa: E402
from stabkit.sweep.spec import Job, SweepSpec, load_spec, parse_spec  # noqa: E402

__all__ = ["REPORT_FORMATS", "Job", "SweepSpec", "load_spec", "make_executor", "parse_spec", "read_manifest", "run_sweep"]
