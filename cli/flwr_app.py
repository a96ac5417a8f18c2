"""``stabkit pair --flwr-app``: the command-line side of :mod:`stabkit.run.flwr_app` (refusals, progress and the
summary line); not a command of its own."""
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
    2: failed, the rounds before kept)."""
    if other_mode:
        raise ConfigError("invalid option --flwr-app with --resume or --estimate: an app run is started afresh")
    require_out(out)
    out = Path(out) if out is not None else Path("runs") / f"flwr-app-{datetime.now():%Y%m%d-%H%M%S}"
    from stabkit.store.outdir import check_writable

    check_writable(out)
    check_new_run_dir(out, overwrite)
    if tensorboard is not None:
        from stabkit.store.tensorboard import check_logdir

        check_logdir(tensorboard, out.name)
    from tqdm import tqdm

    from stabkit.run.flwr_app import run_app

    with tqdm(total=cfg.rounds, unit="round", disable=quiet, dynamic_ncols=True, desc=f"{spec} {cfg.perturb}") as bar:
        summary = run_app(spec, cfg, out, overwrite, progress=lambda t: bar.update(t - bar.n))
    if tensorboard is not None:
        from stabkit.store.tensorboard import write_events

        click.echo(f"tensorboard: {write_events(out, Path(tensorboard) / out.name)}")
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
