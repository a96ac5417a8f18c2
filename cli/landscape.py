"""``stabkit landscape RUN [RUN ...] [--round T] --plot``: loss surfaces of saved global models (docs/flatness.md).

Writes ``landscape.json`` (every surface, every choice) and, with ``--plot``, contour and surface figures
(PNG + PDF) to ``--out`` (default ``RUN/landscape/round_T`` for one run). Several runs are drawn side by
side with the same random-direction seed and shared colour levels.
"""
from __future__ import annotations

from pathlib import Path

import click

from stabkit.errors import ConfigError


@click.command()
@click.argument("runs", nargs=-1, required=True)
@click.option("--round", "round_", type=int, default=None, help="saved round T (default: the last saved)")
@click.option("--pair", default=0, show_default=True, help="pair whose models are drawn")
@click.option("--traj", default="a", show_default=True, help="trajectory drawn: a or b")
@click.option("--points", default=21, show_default=True, help="grid points per axis")
@click.option("--span", default=1.0, show_default=True, help="random directions: a, b in [-span, span]")
@click.option("--seed", default=0, show_default=True, help="seed of the random directions (same for every run)")
@click.option("--orthogonalise", is_flag=True, help="orthogonalise direction 2 against direction 1")
@click.option("--fraction", default=1.0, show_default=True,
              help="fixed fraction of every client's training samples and of the test set")
@click.option("--no-plane", is_flag=True, help="skip the model plane (it replays rounds 1..T for the client models)")
@click.option("--label", "labels", multiple=True, help="label per run (default: its algorithm, else its folder)")
@click.option("--out", default=None, help="output folder (default RUN/landscape/round_T; required for several runs)")
@click.option("--plot", is_flag=True, help="draw the contour and surface figures (PNG + PDF)")
def landscape(runs, labels, out, plot, round_, no_plane, **surface):
    """Random-direction and model-plane loss surfaces of saved global models, and the paired slice.

    \b
    Example (the final models `stabkit pair` saves by default):
      stabkit landscape runs/quick --points 11 --plot
    """
    from stabkit.flatness.settings import LandscapeSettings, open_saved
    from stabkit.store.outdir import check_writable

    settings = LandscapeSettings(round=round_, plane=not no_plane, **surface)  # pair, traj, points, span, ...
    if labels and len(labels) != len(runs):
        raise ConfigError(f"invalid label={list(labels)}: give one --label per run ({len(runs)})")
    if out is None and len(runs) > 1:
        raise ConfigError("invalid out=None: give --out DIR when drawing several runs")
    opened = [open_saved(r, round_, settings.pair) for r in runs]
    out = Path(out) if out else Path(runs[0]) / "landscape" / f"round_{opened[0].round}"
    check_writable(out)  # before the surfaces are computed, not after
    # the options, the runs' configs and their model files are checked: only now torch (~1.5 s) is imported
    from stabkit.flatness.landscape import landscape as compute
    from stabkit.run.experiment import rebuilt_engine
    from stabkit.run.replay import replay_clients
    from stabkit.store.atomic import atomic_write_json
    from stabkit.store.outdir import output_dir

    results = [compute(r, settings, rebuilt_engine, replay_clients) for r in opened]
    algos = [r["algo"] for r in results]
    names = list(labels) or (algos if len(set(algos)) == len(algos) else [Path(r).name for r in runs])
    with output_dir(out):  # a full disk or read-only folder: one line, and nothing of it left
        atomic_write_json(out / "landscape.json", {"runs": [{"label": n, **r} for n, r in zip(names, results)]})
        figures = _plot(names, results, out) if plot else None
    click.echo(f"landscape: {out / 'landscape.json'}")
    for n, r in zip(names, results):
        line = f"{n} (round {r['round']}): curvature along d1 {r['random']['curvature_d1']['train']:.4g}"
        if "plane" in r:
            line += (f", mean client distance {r['plane']['mean_client_distance']:.4g}, "
                     f"replay max |diff| {r['replay_max_abs_diff']:.2g}")
        click.echo(line)
    if figures:
        click.echo("figures: " + ", ".join(str(p) for p in figures))


def _plot(names: list, results: list, out: Path) -> list:
    from stabkit.flatness.plots import plot_landscapes

    return plot_landscapes(list(zip(names, results)), out)


command = landscape
