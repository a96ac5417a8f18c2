"""``stabkit sweep SPEC --out DIR``: run a grid of paired runs, resumably, locally or on a Ray cluster.

SPEC is a YAML/JSON sweep spec (see :mod:`stabkit.sweep.spec`); without one, the shorthand
``--set KEY=VALUE`` (base) and ``--axis KEY=V1,V2,...`` (product axes) builds it on the line. Re-running
the same command skips finished jobs; progress shows jobs done/running/failed and an ETA, and one line
per finished job.
"""
from __future__ import annotations

import time
from pathlib import Path

import click

from stabkit.algorithms.variant import split_names
from stabkit.errors import ConfigError, require
from stabkit.keyvalue import read_items, value
from stabkit.sweep import EXECUTORS
from stabkit_cli.help import Choice


def _pairs(items, what):
    """``--set`` / ``--axis`` items as ``{key: text}`` (each key once; the texts are read by
    :func:`stabkit.keyvalue.value`, as ``--hp``'s are: ``true`` is a bool, ``[0, 20]`` a list, ``1e-3`` a number)."""
    return read_items(items, what, " ".join(items), read=str)


# Keys whose documented value ``none`` is a word, not "no value": ``--set save_models=none`` means what
# ``save_models: none`` means in a YAML spec
NONE_IS_A_WORD = ("save_models",)


def _shorthand(sets, axes) -> dict:
    read = lambda k, v: v.strip() if k in NONE_IS_A_WORD and v.strip().lower() == "none" else value(v)  # noqa: E731
    sets, axes = _pairs(sets, "set"), _pairs(axes, "axis")
    both = next((k for k in sets if k in axes), None)
    if both is not None:
        raise ConfigError(f"invalid set={both}={sets[both]!r}: --set {both} is given beside --axis {both}="
                          f"{axes[both]}; give it once (an axis, or a fixed value)")
    base = {k: read(k, v) for k, v in sets.items()}
    product = {k: [read(k, x) for x in split_names(v)] for k, v in axes.items()}  # [a,b] kept
    return {"base": base, "product": product}


class Progress:
    """Overall progress line (done/running/failed, ETA) and one summary line per finished job."""

    def __init__(self, quiet: bool):
        self.quiet, self.start, self.finished_now = quiet, time.perf_counter(), 0

    def __call__(self, event, job_id, manifest, info):
        if event == "start" and info.get("problem"):  # said even with --quiet: the user's file was damaged
            click.echo(f"manifest.json was {info['problem']}: rebuilt from the job directories "
                       f"({info['recovered']} finished jobs found, not rerun)")
        if self.quiet:
            return
        c = manifest.counts()
        total = len(manifest.jobs)
        if event == "start":
            click.echo(f"sweep {manifest.spec.name}: {info['total']} jobs, {info['total'] - info['todo']} already "
                       f"finished, {info['todo']} to run -> {manifest.root}")
            return
        if event != "finished":
            return
        self.finished_now += 1
        rec = manifest.jobs[job_id]
        if rec["state"] == "done":
            s = rec["summary"]
            line = f"done   {job_id}: D_T = {s['final_disc']:.4g}"
            if s.get("final_test_acc") is not None:
                line += f", test acc {s['final_test_acc']:.3f}"
        else:
            line = f"FAILED {job_id}: {rec['error']}"
        elapsed = time.perf_counter() - self.start
        left = total - c["done"] - c["failed"]
        eta = elapsed / self.finished_now * left
        click.echo(f"[{c['done'] + c['failed']}/{total} | done {c['done']} running {c['running']} failed "
                   f"{c['failed']} | {rec.get('wall_s', 0):.1f}s, ETA {eta:.0f}s] {line}")


GPUS_HELP = ("GPUs each job holds: a fraction up to 1 packs jobs (0.25: four a GPU) or a whole number; default 1 for "
             "device cuda, and for auto where the cluster or machine has GPUs; a device cpu job holds none")
CPUS_HELP = "CPUs each job holds (its torch threads)"
GPUS_PLAN_HELP = ("also project the wall time on N GPUs, from GPU round timings in benchmarks/results_gpu*.json "
                  "and results_cuda_*.json (printed with it)")
SHIP_HELP = ("ray executor: build each task here once and send its arrays through Ray's object store (for nodes "
             "without the data files); refused above half the smallest node's object store")


def resources(gpus_per_job, cpus_per_job):
    """The ``--gpus-per-job`` / ``--cpus-per-job`` of a command, checked (before torch is imported)."""
    from stabkit.sweep.placement import Resources

    return Resources(gpus_per_job, cpus_per_job)


def check_gpus(gpus) -> None:
    """``--gpus N`` of a projection: a positive integer."""
    require(gpus is None or gpus >= 1, "gpus", gpus, "a positive number of GPUs to project onto")


def estimate(sw, workers: int, gpus, gpus_per_job) -> None:
    """``--estimate``: every job checked on its data, the sweep's projected time here (and on ``gpus`` GPUs)
    printed from 2-round calibrations (:mod:`stabkit.atlas.estimate`); nothing is run or written."""
    from stabkit.atlas.estimate import projected_seconds
    from stabkit.atlas.gpuplan import projection_lines
    from stabkit.sweep.jobcheck import check_job_data

    jobs = sw.jobs()
    check_job_data(jobs)
    est = projected_seconds(jobs, workers)
    click.echo(f"sweep {sw.name}: {len(jobs)} jobs; projected {est['total_s'] / 60:.1f} min on {workers} worker(s) "
               f"here (from 2-round calibrations per task and per algorithm; done jobs are skipped)")
    for line in projection_lines(est, gpus, gpus_per_job) if gpus else []:
        click.echo(line)


def report_lost(ctx, manifest, out) -> None:
    """Jobs lost with their node after their retries: said in one line; exit status 1 (a re-run runs them)."""
    from stabkit.sweep.runner import lost_jobs

    lost = lost_jobs(manifest)
    if lost:
        first = next(iter(lost.values()))
        click.echo(f"{len(lost)} of {len(manifest.jobs)} jobs were lost with their node ({first}); run the same "
                   f"command again to run them (the finished jobs are kept in {out})")
        ctx.exit(1)


@click.command()
@click.argument("spec", required=False)
@click.option("--out", required=True, help="output folder: the sweep (manifest.json, jobs/<id>/ run directories)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="shorthand: base config value (repeatable)")
@click.option("--axis", "axes", multiple=True, metavar="KEY=V1,V2", help="shorthand: product axis (repeatable)")
@click.option("--executor", type=Choice(EXECUTORS), default="local", show_default=True, help="local or ray")
@click.option("--workers", default=1, show_default=True, type=int,
              help="local executor: parallel processes, one job each (1 = sequential, in this process)")
@click.option("--address", default=None, help="ray executor: HOST:PORT of a cluster, auto, or local (start one)")
@click.option("--gpus-per-job", default=None, type=float, metavar="F",
              help=GPUS_HELP)
@click.option("--cpus-per-job", default=1, show_default=True, type=int, metavar="N", help=CPUS_HELP)
@click.option("--ship-data", is_flag=True, help=SHIP_HELP)
@click.option("--estimate", is_flag=True, help="print the projected time (here, and with --gpus on N GPUs); run "
              "nothing")
@click.option("--gpus", default=None, type=int, metavar="N", help=GPUS_PLAN_HELP)
@click.option("--force", is_flag=True, help="accept a changed spec in an existing directory: redo changed jobs")
@click.option("--retry-failed", is_flag=True, help="run failed jobs again")
@click.option("--tensorboard", "tensorboard", default=None, metavar="DIR",
              help="also write each job's per-round scalars (D_t mean and per pair, train/test loss and accuracy of "
                   "both trajectories, the gap, R_u - R_e) as TensorBoard events, one run folder per job: "
                   "DIR/<sweep directory>/<job id> (needs the tensorboard extra)")
@click.option("--quiet", is_flag=True, help="no progress display (the line per finished job); the summary is still "
                                         "printed")
@click.pass_context
def sweep(ctx, spec, out, sets, axes, executor, workers, address, **flags):
    """Run a grid of paired runs (algorithms x hyperparameters x perturbations x seeds), resumably.

    \b
    Example (FedAvg and FedSAGD, two seeds each, 30 rounds; `stabkit report runs/sweep` then compares them):
      stabkit sweep --axis algo=fedavg,fedsagd --axis seed=0,1 --set rounds=30 --out runs/sweep
    """
    if spec and (sets or axes):
        raise ConfigError("invalid spec: give a spec file or --set/--axis shorthand, not both")
    if not spec and not axes:
        raise ConfigError("invalid spec=None: give a sweep spec file, or at least one --axis KEY=V1,V2")
    from stabkit.store.runstore import require_out

    require_out(out)
    res, gpus = resources(flags["gpus_per_job"], flags["cpus_per_job"]), flags["gpus"]
    check_gpus(gpus)
    if gpus is not None and not flags["estimate"]:
        raise ConfigError(f"invalid gpus={gpus}: --gpus projects a sweep's time; add --estimate")
    shorthand = None if spec else _shorthand(sets, axes)  # before torch is imported: a refusal well under 1 s
    from stabkit.sweep import load_spec, make_executor, parse_spec, run_sweep  # imported on use: torch
    from stabkit.sweep.tensorboard import with_tensorboard

    sw = load_spec(spec) if spec else parse_spec(shorthand, source="shorthand")
    if flags["estimate"]:
        return estimate(sw, workers, gpus, res.gpus)
    progress = with_tensorboard(Progress(flags["quiet"]), flags["tensorboard"], Path(out).name)
    manifest = run_sweep(sw, out, make_executor(executor, workers, address, res, flags["ship_data"]), force=flags["force"],
                         retry_failed=flags["retry_failed"], progress=progress)
    c = manifest.counts()
    click.echo(f"{c['done']} done, {c['failed']} failed of {len(manifest.jobs)} jobs in {out}")
    report_lost(ctx, manifest, out)
    errors = {job: rec["error"] for job, rec in manifest.jobs.items()
              if rec["state"] == "failed" and not str(rec.get("error")).startswith("diverged:")}
    if errors:  # a job that failed, not one that diverged: say which and why, even with --quiet
        raise ConfigError(f"{len(errors)} of {len(manifest.jobs)} jobs failed: " + "; ".join(
            f"{job}: {why}" for job, why in errors.items()) + f" (fix it, then rerun with --retry-failed; the "
            f"finished jobs are kept in {out})")
    if c["failed"]:
        ctx.exit(1)


command = sweep
