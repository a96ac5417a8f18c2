"""``stabkit algos``: every algorithm (built-in and installed plug-ins) with its hyperparameters, defaults,
ranges and paper."""
import click

from stabkit.algorithms import ALGORITHMS, available_algorithms


def _about(name: str, cls) -> tuple:
    """``(title, reference)``; a plug-in's reference names the module it comes from."""
    title, reference = getattr(cls, "title", cls.name), getattr(cls, "reference", "")
    if name not in ALGORITHMS:
        reference = f"{reference} [plug-in {cls.__module__}]".strip()
    return title, reference


def _markdown() -> str:
    lines = ["| `--algo` | method | hyperparameters (`--hp NAME=VALUE`, default) | reference |", "|---|---|---|---|"]
    for name, cls in available_algorithms().items():
        title, reference = _about(name, cls)
        hps = "; ".join(f"`{n}`={d!r} ({allowed.replace('|', ' / ')})"
                        for n, d, allowed, _ in cls.params_cls.describe()) or "—"
        lines.append(f"| `{name}` | {title} | {hps} | {reference} |")
    return "\n".join(lines)


@click.command()
@click.option("--markdown", is_flag=True, help="print a Markdown table (as in docs/algorithms.md)")
def algos(markdown):
    """List the algorithms, their hyperparameters (set with --hp NAME=VALUE) and references.

    \b
    Example (the table of docs/algorithms.md):
      stabkit algos --markdown
    """
    if markdown:
        click.echo(_markdown())
        return
    for name, cls in available_algorithms().items():
        title, reference = _about(name, cls)
        click.echo(f"{name}  ({title}) — {reference}")
        rows = cls.params_cls.describe()
        if not rows:
            click.echo("    (no hyperparameters of its own)")
        for hp_name, default, allowed, doc in rows:
            click.echo(f"    {hp_name} = {default!r:<8} {allowed:<16} {doc}")


command = algos
