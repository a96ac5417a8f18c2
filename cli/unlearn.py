"""``stabkit unlearn RUN --method NAME``: an unlearning method on a ``--perturb remove-client`` run, judged
against the exact coupled retrain (trajectory B) and the retraining noise floor (``stabkit.unlearn``).

Prints one row per pair (``--format json``: ``{"method": ..., "pairs": [{"pair": r, "distance_to_retrain": ...,
"distance_none": ..., "floor": ..., ...}]}``, in pair order); writes nothing.
"""
from __future__ import annotations

import click

from stabkit.keyvalue import read_items
from stabkit.store.atomic import strict_json
from stabkit_cli.help import Choice

FORMATS = ("text", "json")


@click.command()
@click.argument("run_dir")
@click.option("--method", required=True, help="none, finetune, gradient-ascent, federaser, or a plug-in "
              "package.module:Class (a stabkit.unlearn.UnlearningMethod)")
@click.option("--hp", "hp_items", multiple=True, metavar="NAME=VALUE",
              help="the method's hyperparameters, e.g. --hp rounds=3 (finetune), --hp steps=20 --hp radius=0.2 "
              "(gradient-ascent), --hp interval=2 --hp ratio=0.5 (federaser)")
@click.option("--floor-seeds", type=int, default=None,
              help="retrains of B with fresh seeds for the retraining noise floor (each costs the run's training)")
@click.option("--format", "fmt", type=Choice(FORMATS), default="text", show_default=True,
              help="printed output: a table, or JSON for scripts")
def unlearn(run_dir, method, hp_items, floor_seeds, fmt):
    """Unlearn the removed client from A's final models and measure the distance to the exact retrain.

    \b
    Example (on a run made by `stabkit pair --perturb remove-client --store-updates --out loo`):
      stabkit unlearn loo --method federaser --floor-seeds 4
    """
    hp = read_items(hp_items, "hp", " ".join(hp_items))  # the one KEY=VALUE reader: each name once
    from stabkit.unlearn.measure import check_unlearnable
    from stabkit.unlearn.measure import unlearn as run_unlearn

    check_unlearnable(run_dir, method, hp, floor_seeds)  # refused before torch is imported
    report = run_unlearn(run_dir, method, hp, floor_seeds, echo=lambda line: click.echo(line, err=True))
    if fmt == "json":
        click.echo(strict_json(report))  # NaN (a regression task's accuracy) as null
        return
    click.echo(format_report(report))


def format_report(report: dict) -> str:
    """The per-pair table and the means over pairs."""
    rows = report["pairs"]
    head = (f"{'pair':>4} {'client':>6} {'dist':>9} {'none':>9} {'floor':>9} {'dist/fl':>8} {'forg acc':>8} "
            f"{'retrain':>8} {'test acc':>8} {'retrain':>8} {'steps':>8} {'retrain':>8}")
    lines = [f"method {report['method']} {report['hp']}", head]

    def num(v, f):
        return f"{'-':>{f}}" if v is None else f"{v:>{f}.4g}"

    for p in rows:
        lines.append(f"{p['pair']:>4} {p['forgotten_client']:>6} {num(p['distance_to_retrain'], 9)} "
                     f"{num(p['distance_none'], 9)} {num(p['floor'], 9)} {num(p['distance_in_floor_units'], 8)} "
                     f"{num(p['forgotten_acc'], 8)} {num(p['forgotten_acc_retrain'], 8)} {num(p['test_acc'], 8)} "
                     f"{num(p['test_acc_retrain'], 8)} {num(p['client_steps'], 8)} {num(p['retrain_client_steps'], 8)}")

    def mean(key):
        values = [p[key] for p in rows if p[key] is not None]
        return sum(values) / len(values) if values else None

    lines.append(f"mean over {len(rows)} pairs: distance to retrain {mean('distance_to_retrain'):.4g}, doing nothing "
                 f"{mean('distance_none'):.4g}" + ("" if mean("floor") is None else f", floor {mean('floor'):.4g}")
                 + f"; client steps {mean('client_steps'):.4g} (retrain {mean('retrain_client_steps'):.4g})")
    return "\n".join(lines)


command = unlearn
