"""``stabkit models``: the model architectures with their parameter counts on the papers' input shapes, and
the installed plug-in models (entry-point group ``stabkit.models``)."""
import click

from stabkit import plugins
from stabkit.models.catalogue import DESCRIPTIONS, MODELS, PARAMETERS, REFERENCE_SHAPES


@click.command()
def models():
    """List the models (--model NAME) with their parameter counts."""
    for name in MODELS:
        label = REFERENCE_SHAPES[name][0]
        click.echo(f"{name:<12} {PARAMETERS[name]:>11,d} parameters on {label:<26} {DESCRIPTIONS[name]}")
    for name, ep in plugins.installed("model").items():
        click.echo(f"{name:<12} {'plug-in':>11} factory(task) {ep.value}")


command = models
