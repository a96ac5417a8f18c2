"""``stabkit atlas``: every algorithm measured side by side on a suite of tasks, as one resumable sweep,
then one self-contained page (``OUT/index.html``) with the ranked tables, frontier and figures."""
from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from stabkit.atlas.suites import SUITES
from stabkit.errors import ConfigError
from stabkit.sweep import EXECUTORS
from stabkit_cli.help import Choice
from stabkit_cli.sweep import CPUS_HELP, GPUS_HELP, GPUS_PLAN_HELP, SHIP_HELP, Progress, check_gpus, resources


@click.command()
@click.option("--suite", type=Choice(tuple(SUITES)), default="small", show_default=True,
              help="small (this machine's CPU, minutes), paper (the papers' CIFAR-10/EMNIST presets, --data-dir; "
                   "for a GPU or a cluster) or ci (seconds)")
@click.option("--algos", default=None, metavar="A,B,...",
              help="algorithms (built-in names, installed plug-ins, package.module:Class); default: all of them")
@click.option("--out", default="atlas", show_default=True, help="output folder: the atlas (page, tables, figures; "
                                                                 "sweep/)")
@click.option("--seeds", default=None, type=int, help="replicate seeds per cell (default: the suite's)")
@click.option("--pairs", default=None, type=int, help="pairs in every job (default: the suite's, per task)")
@click.option("--perturbs", default=None, metavar="P,Q,...",
              help="perturbation columns (default: the suite's client,sample), e.g. client,sample,remove-client "
                   "adds the leave-one-out column")
@click.option("--ci-target", default=None, type=float, metavar="H",
              help="then give every ranked cell whose 95% half-width of D_T exceeds H x its mean the pairs its "
                   "spread asks for (e.g. 0.1 for +-10%; up to three more resumable sweeps, OUT/topup, "
                   "OUT/topup2, ...); default: the suite's")
@click.option("--no-top-up", is_flag=True, help="no top-up, whatever the suite's --ci-target")
@click.option("--max-units", default=1024, show_default=True, type=int,
              help="with --ci-target: replicate units (seeds x pairs) per cell at most")
@click.option("--tune", default=None, metavar="KEY=V1,V2,...",
              help="tune KEY (lr, global_lr or hp.NAME) per algorithm and task over the grid: the point with the "
                   "best validation accuracy at T (validation split of the training clients; regression: loss), "
                   "ties to the smaller; a choice on the grid's edge is extended beyond it (the grid's ratio, at "
                   "most 4 values per side) until interior; the page shows the tuned view first and the equal-rate "
                   "view second. KEY alone: the suite's default grid (small: lr 0.0125-0.2). Further axes, tuned "
                   "jointly (a product): NAME=V1,V2 (every algorithm with hyperparameter NAME), ALGO.NAME=V1,V2 (one "
                   "algorithm), hp (momentum of FedAvgM, FedACG, FedSAGD, FedCM, MimeLite; mu of FedProx, FedDyn), "
                   "e.g. --tune lr,hp")
@click.option("--data-dir", default=None, help="paper suite: folder with the data sets' files")
@click.option("--executor", type=Choice(EXECUTORS), default="local", show_default=True, help="local or ray")
@click.option("--workers", default=None, type=int,
              help="local executor: parallel processes, one job each (default: one per CPU this process may use; every job "
                   "runs on one thread, so the numbers do not depend on it)")
@click.option("--address", default=None, help="ray executor: HOST:PORT, auto, or local")
@click.option("--gpus-per-job", default=None, type=float, metavar="F", help=GPUS_HELP)
@click.option("--cpus-per-job", default=1, show_default=True, type=int, metavar="N", help=CPUS_HELP)
@click.option("--ship-data", is_flag=True, help=SHIP_HELP)
@click.option("--dry-run", is_flag=True, help="check everything and print the projected time; run nothing")
@click.option("--gpus", default=None, type=int, metavar="N", help=GPUS_PLAN_HELP)
@click.option("--no-projection", is_flag=True, help="skip the projected-time calibration")
@click.option("--tensorboard", "tensorboard", default=None, metavar="DIR",
              help="also write each job's per-round scalars (D_t mean and per pair, train/test loss and accuracy of "
                   "both trajectories, the gap, R_u - R_e) as TensorBoard events, one run folder per job: "
                   "DIR/sweep|topup|.../<job id> (needs the tensorboard extra)")
@click.option("--quiet", is_flag=True, help="no progress display (the line per finished job); the summary is still "
                                         "printed")
@click.pass_context
def atlas(ctx, out, executor, workers, address, gpus_per_job, cpus_per_job, ship_data, quiet, **request):
    """Measure every algorithm on a suite of tasks and write the stability atlas page.

    \b
    Example (every algorithm on the small suite, tens of minutes on 2 cores; --dry-run projects the time):
      stabkit atlas --suite small --workers 2 --out atlas
    """
    if request["ci_target"] is not None and request["no_top_up"]:  # before torch is imported: well under 1 s
        raise ConfigError(f"invalid ci_target={request['ci_target']!r}: --ci-target asks for a top-up that --no-top-up turns "
                          "off; give one of them")
    workers, runs_on = _checked_executor(out, executor, workers, address, resources(gpus_per_job, cpus_per_job),
                                         ship_data, request["gpus"])
    from stabkit.atlas.runner import (  # imported on use: the page's libraries, torch
        SWEEP,
        TENSORBOARD_FOLDERS,
        AtlasRequest,
        run_atlas,
    )
    from stabkit.store.fserrors import undone_on_fs_error
    from stabkit.sweep.runner import has_finished_jobs
    from stabkit.sweep.tensorboard import with_tensorboard

    suite, dry_run, tensorboard = request["suite"], request["dry_run"], request.pop("tensorboard")
    command = "stabkit " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["atlas"] else ""
    req = AtlasRequest(workers=workers, command=command or f"stabkit atlas --suite {suite} --out {out}",
                       project=not request.pop("no_projection"), top_up=not request.pop("no_top_up"), **request)
    with undone_on_fs_error(out, keep=lambda: has_finished_jobs(Path(out) / SWEEP)):  # a full or read-only disk
        res = run_atlas(req, out, runs_on, echo=click.echo,
                        progress=with_tensorboard(Progress(quiet), tensorboard, *TENSORBOARD_FOLDERS))
    if dry_run:
        return
    c = res["counts"]
    click.echo(f"{c['done']} done, {c['failed']} failed or diverged (kept in the tables) of "
               f"{sum(c.values())} jobs\npage: {res['page']}\ntables: {res['cells']}, {res['markdown']}")
    if c.get("pending"):  # lost with their node after their retries (Ray): the page lacks them until a re-run
        click.echo(f"{c['pending']} jobs were lost with their node; run the same command again to run them")
        ctx.exit(1)


def _checked_executor(out, executor: str, workers, address, res, ship_data: bool, gpus) -> tuple:
    """``(workers, executor)`` after the checks the options alone decide, before the atlas's imports (pandas,
    scipy, matplotlib, torch: ~1.5 s): the output folder, the GPUs, the executor and its address."""
    from stabkit.engine.threads import usable_cpus
    from stabkit.store.outdir import check_writable
    from stabkit.store.runstore import require_out
    from stabkit.sweep import make_executor

    require_out(out)
    check_gpus(gpus)
    check_writable(out)  # as the plan checks it
    workers = len(usable_cpus()) if workers is None else workers
    return workers, make_executor(executor, workers, address, res, ship_data)  # a bad --address, refused early


command = atlas
