"""``stabkit models``: the model architectures with their parameter counts on the papers' input shapes, and
the installed plug-in models (entry-point group ``stabkit.models``)."""
import click

from stabkit import plugins
from stabkit.models.catalogue import CATALOGUE


@click.command()
def models():
    """List the models (--model NAME) with their parameter counts.

    \b
    Example:
      stabkit models
    """
    for name, info in CATALOGUE.items():
        label = info.reference[0]
        click.echo(f"{name:<12} {info.parameters:>11,d} parameters on {label:<26} {info.description}")
    for name, ep in plugins.installed("model").items():
        click.echo(f"{name:<12} {'plug-in':>11} factory(task) {ep.value}")


command = models
