"""``stabkit presets``: the papers' settings available as ``stabkit pair --preset NAME``, with their sources."""
import click

from stabkit.run.presets import PRESETS


@click.command()
def presets():
    """List the presets, the table each comes from and the values it sets."""
    for name, preset in PRESETS.items():
        click.echo(f"{name}  — {preset.source}")
        click.echo("    " + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in preset.values.items()))


command = presets
