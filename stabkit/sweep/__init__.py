"""Sweeps: grids of paired runs (spec), their state (manifest), where they run (executors), the driver
(runner) and the combined tables and figures (report)."""
from stabkit.sweep.executors import make_executor
from stabkit.sweep.manifest import read_manifest
from stabkit.sweep.runner import run_sweep
from stabkit.sweep.spec import Job, SweepSpec, load_spec, parse_spec

__all__ = ["Job", "SweepSpec", "load_spec", "make_executor", "parse_spec", "read_manifest", "run_sweep"]
