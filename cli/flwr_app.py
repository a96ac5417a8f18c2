"""``stabkit pair --flwr-app`` and ``stabkit pair --resume`` of an app run: the command-line side of
:mod:`stabkit.run.flwr_files` (refusals, progress and the summary line); not a command of its own."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from stabkit.errors import ConfigError
from stabkit.store.runstore import check_new_run_dir, require_out

# the options an app run reads (beside --out, --overwrite, --quiet, --tensorboard): every other one would be
# accepted and ignored without a word, so it is refused by name
USED = ("seed", "pairs", "rounds", "clients_per_round", "participation", "perturb")


def refuse_ignored(explicit: set, hp_items, config_keys, preset, label) -> None:
    """One line naming the first option (or config-file key) an app run would ignore."""
    given = [f"--{k.replace('_', '-')}" for k in sorted(explicit - set(USED))]
    given += ["--hp"] * bool(hp_items) + ["--preset"] * bool(preset) + ["--label"] * (label is not None)
    given += [f"config key {k!r}" for k in sorted(set(config_keys) - set(USED))]
    if given:
        raise ConfigError(f"invalid option {given[0]} with --flwr-app: the app trains and aggregates with its own "
                          f"code and settings; an app run uses only --seed, --pairs, --rounds, --clients-per-round "
                          f"(or --participation) and --perturb none|client")


def pair_flower_app(spec: str, cfg, out, overwrite: bool, other_mode, quiet: bool, tensorboard=None) -> None:
    """Run the Flower app ``spec`` paired under ``cfg`` into ``out`` (default ``runs/flwr-app-<time>``), its
    TensorBoard events to ``tensorboard/<run name>`` when given; exit as a paired run does (1: diverged,
    2: failed, 130: interrupted, the rounds before kept)."""
    if other_mode:
        raise ConfigError("invalid option --flwr-app with --resume or --estimate: an app run is continued with "
                          "`stabkit pair --resume DIR` alone (its config.json names the app), and not estimated")
    require_out(out)
    out = Path(out) if out is not None else Path("runs") / f"flwr-app-{datetime.now():%Y%m%d-%H%M%S}"
    from stabkit.store.outdir import check_writable

    check_writable(out)
    check_new_run_dir(out, overwrite)
    events = _events(tensorboard, out)
    from stabkit.run.flwr_files import run_app

    _report(out, f"{spec} {cfg.perturb}", cfg.rounds, quiet, events,
            lambda progress: run_app(spec, cfg, out, overwrite, progress, events))


def resume_flower_app(out, explicit: set, params: dict, other_options, quiet: bool, tensorboard=None) -> None:
    """``stabkit pair --resume DIR`` of an app run: continue it from its checkpoint (``--rounds N`` to extend
    it; every other option refused), reported as a new app run is."""
    given = sorted(explicit - {"rounds"})
    if given or other_options:
        name = given[0].replace("_", "-") if given else "config/--preset/--hp/--out/--overwrite/--label"
        raise ConfigError(f"invalid option --{name} with --resume of a Flower app run: it keeps its settings; only "
                          "--rounds may be given")
    from stabkit.store.rundir import RunDir

    config = RunDir(out, "resume").config
    rounds = params["rounds"] if "rounds" in explicit else config["rounds"]
    events = _events(tensorboard, Path(out))
    from stabkit.run.flwr_files import resume_app

    _report(Path(out), f"{config['flwr_app']} {config['perturb']}", rounds, quiet, events,
            lambda progress: resume_app(out, rounds, progress, events))


def _events(tensorboard, out: Path) -> list:
    """``--tensorboard``: the folder checked now, and the round loop's callback writing the run's events."""
    if tensorboard is None:
        return []
    from stabkit.store.tensorboard import TensorBoardEvents, check_logdir

    check_logdir(tensorboard, out.name)
    return [TensorBoardEvents(out, Path(tensorboard) / out.name)]


def _report(out: Path, desc: str, rounds: int, quiet: bool, events: list, run) -> None:
    """``run(progress)`` under a progress bar, then the summary line; exit 1 (diverged), 2 (failed, one line) or
    130 (interrupted), the rounds before kept. The bar opens with the first round done, so that a run refused
    before it (round 1's checks, a damaged checkpoint) prints its one line alone."""
    from tqdm import tqdm

    bars: list = []

    def progress(t: int) -> None:
        if not bars:
            bars.append(tqdm(total=rounds, unit="round", disable=quiet, dynamic_ncols=True, desc=desc))
        bars[0].update(t - bars[0].n)

    try:
        summary = run(progress)
    finally:
        for bar in bars:
            bar.close()
    for cb in events:
        click.echo(f"tensorboard: {cb.written}")
    done = summary["rounds_done"]
    if summary["status"] == "failed":
        raise ConfigError(f"{summary['failed_reason']}; rounds 0-{done} are kept in {out}")
    click.echo(f"{out}: {done} rounds, final D_T mean {summary['final_disc_mean']:.4g} "
               f"(max {summary['final_disc_max']:.4g}), {summary['client_calls']} ClientApp calls, "
               f"{summary['s_per_round']:.2f} s/round")
    if summary["status"] == "diverged":
        click.echo(f"run diverged ({summary['diverged_reason']}) at round {summary['diverged_round']}; metrics up "
                   f"to round {done} are kept", err=True)
        click.get_current_context().exit(1)
    if summary["status"] == "interrupted":
        click.echo(f"interrupted at {summary['interrupted']}; metrics up to round {done} are kept in {out} "
                   f"(continue with `stabkit pair --resume {out}`)", err=True)
        click.get_current_context().exit(130)
