"""``sweep_page``: the atlas's kind of page for any sweep (``stabkit report --html``): one table per task x
perturbation, one row per setting (the non-seed swept values), pooled over seeds and pairs."""
from __future__ import annotations

from pathlib import Path

from stabkit.atlas.cells import cell_table, read_jobs
from stabkit.atlas.floors import DEFAULT_FLOOR
from stabkit.atlas.page import write_page
from stabkit.sweep.manifest import read_manifest


def sweep_page(root, out=None) -> dict:
    """Write ``index.html`` (+ cells.csv, cells.md, figures/) for sweep directory ``root`` into ``out``
    (default ``root/report``)."""
    root = Path(root)
    name = read_manifest(root)["spec"].get("name", "sweep")
    out = Path(out) if out else root / "report"
    policy = (f"Cells are flagged 'no learning' (kept out of rankings and correlations) at a "
              f"{DEFAULT_FLOOR.describe()}.")
    return write_page(cell_table(read_jobs(root)), root, out, title=f"stabkit sweep {name}",
                      description=f"sweep directory {root}", command=f"stabkit report {root} --html",
                      policy=policy)
