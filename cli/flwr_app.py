"""``stabkit pair --flwr-app``: the command-line side of :mod:`stabkit.run.flwr_app` (refusals, progress and the
summary line); not a command of its own."""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from stabkit.errors import ConfigError
from stabkit.store.runstore import check_new_run_dir, require_out


def pair_flower_app(spec: str, cfg, out, overwrite: bool, other_mode, quiet: bool) -> None:
    """Run the Flower app ``spec`` paired under ``cfg`` into ``out`` (default ``runs/flwr-app-<time>``)."""
    if other_mode:
        raise ConfigError("invalid option --flwr-app with --resume or --estimate: an app run is started afresh")
    require_out(out)
    out = Path(out) if out is not None else Path("runs") / f"flwr-app-{datetime.now():%Y%m%d-%H%M%S}"
    check_new_run_dir(out, overwrite)
    from tqdm import tqdm

    from stabkit.run.flwr_app import run_app

    with tqdm(total=cfg.rounds, unit="round", disable=quiet, dynamic_ncols=True, desc=f"{spec} {cfg.perturb}") as bar:
        summary = run_app(spec, cfg, out, overwrite, progress=lambda t: bar.update(t - bar.n))
    click.echo(f"{out}: {summary['rounds_done']} rounds, final D_T mean {summary['final_disc_mean']:.4g} "
               f"(max {summary['final_disc_max']:.4g}), {summary['client_calls']} ClientApp calls, "
               f"{summary['s_per_round']:.2f} s/round")
