"""``stabkit algos``: every algorithm with its hyperparameters, defaults, ranges and paper."""
import click

from stabkit.algorithms import ALGORITHMS


@click.command()
def algos():
    """List the algorithms, their hyperparameters (set with --hp NAME=VALUE) and references."""
    for name, cls in ALGORITHMS.items():
        click.echo(f"{name}  ({cls.title}) — {cls.reference}")
        rows = cls.params_cls.describe()
        if not rows:
            click.echo("    (no hyperparameters of its own)")
        for hp_name, default, allowed, doc in rows:
            click.echo(f"    {hp_name} = {default!r:<8} {allowed:<16} {doc}")


command = algos
