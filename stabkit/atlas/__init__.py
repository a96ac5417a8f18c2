"""The stability atlas: every algorithm measured side by side on a suite of tasks (suites), pooled per cell
with intervals (cells) and judged against each task's learning floor (floors), the stability-accuracy
frontier and the stability-generalisation link (link), the cells' display names (names), figures and a
self-contained page (figures, page, templates/; sweeppage gives any sweep such a page), run as one resumable
sweep (runner, estimate; on N GPUs: gpuplan) and topped up with more pairs where an interval is too wide (topup). Tuned, every
algorithm runs at its own rate (and momentum or proximal weight) chosen on a validation split (tuning), a
choice on a grid's edge is extended beyond it (extend), the page shows that view first
(tunedpage, views) with D_T at a matched accuracy (matched), and algorithms that are the same update at their
defaults are measured once (aliases). Names are
imported on first use (PEP 562): the CLI's start-up imports no torch through them.
"""
from stabkit.lazy import lazy_getattr

_EXPORTS = {"run_atlas": "stabkit.atlas.runner", "AtlasRequest": "stabkit.atlas.runner",
            "atlas_page": "stabkit.atlas.runner",
            "SUITES": "stabkit.atlas.suites", "get_suite": "stabkit.atlas.suites",
            "cell_table": "stabkit.atlas.cells", "read_jobs": "stabkit.atlas.cells",
            "write_page": "stabkit.atlas.page", "sweep_page": "stabkit.atlas.sweeppage"}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(globals(), _EXPORTS)
