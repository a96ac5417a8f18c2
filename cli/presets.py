"""``stabkit presets [NAME]``: the papers' settings available as ``stabkit pair --preset NAME``, with their
sources and, per algorithm, the readings of the authors' code the preset applies (and the spec item each follows)."""
import click

from stabkit.config.presets import PRESETS, preset_values


def _flags(values: dict) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items())


@click.command()
@click.argument("name", required=False)
def presets(name):
    """List the presets, the table each comes from and the values it sets; with NAME, also its code readings."""
    if name is not None:
        preset_values(name)  # one-line error for an unknown name
    for key, preset in PRESETS.items():
        if name is not None and key != name:
            continue
        click.echo(f"{key}  — {preset.source}")
        click.echo("    " + _flags(preset.values))
        if name is None:
            if preset.readings:
                click.echo(f"    code readings for: {', '.join(preset.readings)} (stabkit presets {key})")
            continue
        if not preset.readings:
            click.echo("    code readings: none (the paper's text and stabkit's defaults)")
        for algo, reading in preset.readings.items():
            hp = " ".join(f"--hp {k}={v}" for k, v in reading.hp.items())
            click.echo(f"    --algo {algo}: {' '.join(filter(None, [hp, _flags(reading.run)]))}")
            click.echo(f"        follows {reading.spec}")


command = presets
