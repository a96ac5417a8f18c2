"""``stabkit presets [NAME]``: the papers' settings available as ``stabkit pair --preset NAME``, with their
sources and, per algorithm, the readings of the authors' code the preset applies (and the source each follows)."""
import click

from stabkit.config.presets import PRESETS, preset_reading, preset_values


def _flags(values: dict) -> str:
    return " ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items())


@click.command()
@click.argument("name", required=False)
@click.option("--estimate", is_flag=True, help="with NAME: time two rounds and one evaluation of the preset's run "
              "(on fixture data of the real size where --data-dir holds no files) and print the projected wall time")
@click.option("--algo", default="fedavg", show_default=True, help="algorithm of the estimated run")
@click.option("--pairs", default=8, show_default=True, help="pairs of the estimated run")
@click.option("--data-dir", default=None, help="the data set's files (absent: fixture data of the real size)")
@click.option("--device", default="auto", show_default=True, help="device of the estimated run")
def presets(name, estimate, algo, pairs, data_dir, device):
    """List the presets, the table each comes from and the values it sets; with NAME, also its code readings;
    with NAME --estimate, the time its run would take on this machine.

    \b
    Example (FedSAGD's CIFAR-10 setting: its values and the code readings it applies):
      stabkit presets fedsagd-cifar10
    """
    if name is not None:
        preset_values(name)  # one-line error for an unknown name
    if estimate:
        return _estimate(name, algo, pairs, data_dir, device)
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




def _estimate(name, algo: str, pairs: int, data_dir, device: str) -> None:
    from stabkit.errors import ConfigError

    if name is None:
        raise ConfigError("invalid --estimate without a preset NAME: give one, e.g. stabkit presets "
                          "fedswa-cifar100 --estimate")
    from stabkit.config.runconfig import RunConfig
    from stabkit.run.estimate import estimate_config

    reading = preset_reading(name, algo)
    cfg = RunConfig.from_dict({**preset_values(name), **reading.run, "hp": dict(reading.hp), "algo": algo,
                               "pairs": pairs, "data_dir": data_dir, "device": device})
    estimate_config(cfg, echo=click.echo)


command = presets
