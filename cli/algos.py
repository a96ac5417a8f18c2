"""``stabkit algos``: every algorithm with its hyperparameters, defaults, ranges and paper."""
import click

from stabkit.algorithms import ALGORITHMS


def _markdown() -> str:
    lines = ["| `--algo` | method | hyperparameters (`--hp NAME=VALUE`, default) | reference |", "|---|---|---|---|"]
    for name, cls in ALGORITHMS.items():
        hps = "; ".join(f"`{n}`={d!r} ({allowed.replace('|', ' / ')})"
                        for n, d, allowed, _ in cls.params_cls.describe()) or "—"
        lines.append(f"| `{name}` | {cls.title} | {hps} | {cls.reference} |")
    return "\n".join(lines)


@click.command()
@click.option("--markdown", is_flag=True, help="print a Markdown table (as in the README)")
def algos(markdown):
    """List the algorithms, their hyperparameters (set with --hp NAME=VALUE) and references."""
    if markdown:
        click.echo(_markdown())
        return
    for name, cls in ALGORITHMS.items():
        click.echo(f"{name}  ({cls.title}) — {cls.reference}")
        rows = cls.params_cls.describe()
        if not rows:
            click.echo("    (no hyperparameters of its own)")
        for hp_name, default, allowed, doc in rows:
            click.echo(f"    {hp_name} = {default!r:<8} {allowed:<16} {doc}")


command = algos
