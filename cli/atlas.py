"""``stabkit atlas``: every algorithm measured side by side on a suite of tasks, as one resumable sweep,
then one self-contained page (``OUT/index.html``) with the ranked tables, frontier and figures."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from stabkit.errors import ConfigError
from stabkit_cli.sweep import Progress


@click.command()
@click.option("--suite", default="small", show_default=True,
              help="small (this machine's CPU, minutes), paper (the papers' CIFAR-10/EMNIST presets, --data-dir; "
                   "for a GPU or a cluster) or ci (seconds)")
@click.option("--algos", default=None, metavar="A,B,...",
              help="algorithms (built-in names, installed plug-ins, package.module:Class); default: all of them")
@click.option("--out", default="atlas", show_default=True, help="atlas directory (page, tables, figures; sweep/)")
@click.option("--seeds", default=None, type=int, help="replicate seeds per cell (default: the suite's)")
@click.option("--pairs", default=None, type=int, help="pairs in every job (default: the suite's, per task)")
@click.option("--ci-target", default=None, type=float, metavar="H",
              help="then give every ranked cell whose 95% half-width of D_T exceeds H x its mean the pairs its "
                   "spread asks for (e.g. 0.1 for +-10%; up to three more resumable sweeps, OUT/topup, "
                   "OUT/topup2, ...); default: the suite's")
@click.option("--no-top-up", is_flag=True, help="no top-up, whatever the suite's --ci-target")
@click.option("--max-units", default=1024, show_default=True, type=int,
              help="with --ci-target: replicate units (seeds x pairs) per cell at most")
@click.option("--data-dir", default=None, help="paper suite: folder with the data sets' files")
@click.option("--executor", default="local", show_default=True, help="local or ray")
@click.option("--workers", default=None, type=int,
              help="local executor: processes, one job each (default: one per CPU this process may use; every job "
                   "runs on one thread, so the numbers do not depend on it)")
@click.option("--address", default=None, help="ray executor: HOST:PORT, auto, or local")
@click.option("--dry-run", is_flag=True, help="check everything and print the projected time; run nothing")
@click.option("--no-projection", is_flag=True, help="skip the projected-time calibration")
@click.option("--quiet", is_flag=True, help="no progress lines")
def atlas(suite, algos, out, seeds, pairs, ci_target, no_top_up, max_units, data_dir, executor, workers, address,
          dry_run, no_projection, quiet):
    """Measure every algorithm on a suite of tasks and write the stability atlas page."""
    if ci_target is not None and no_top_up:  # before torch is imported: a refusal takes well under 1 s
        raise ConfigError(f"invalid ci_target={ci_target!r}: --ci-target asks for a top-up that --no-top-up turns "
                          "off; give one of them")
    from stabkit.atlas.runner import SWEEP, AtlasRequest, run_atlas  # imported on use: torch
    from stabkit.store.fserrors import undone_on_fs_error
    from stabkit.store.runstore import require_out
    from stabkit.sweep import make_executor
    from stabkit.sweep.runner import has_finished_jobs

    require_out(out)
    if workers is None:
        from stabkit.engine.threads import usable_cpus

        workers = len(usable_cpus())
    command = "stabkit " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["atlas"] else ""
    req = AtlasRequest(suite, algos, workers, data_dir, seeds, pairs,
                       command or f"stabkit atlas --suite {suite} --out {out}", dry_run, not no_projection,
                       ci_target, max_units, not no_top_up)
    with undone_on_fs_error(out, keep=lambda: has_finished_jobs(Path(out) / SWEEP)):  # a full or read-only disk
        res = run_atlas(req, out, make_executor(executor, workers, address), echo=click.echo,
                        progress=Progress(quiet))
    if dry_run:
        return
    c = res["counts"]
    click.echo(f"{c['done']} done, {c['failed']} failed or diverged (kept in the tables) of "
               f"{sum(c.values())} jobs\npage: {res['page']}\ntables: {res['cells']}, {res['markdown']}")


command = atlas
