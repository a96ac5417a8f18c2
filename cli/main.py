"""``stabkit`` command line: thin wrappers that parse, validate, call the library and print a summary.

User mistakes (``ConfigError`` or a click usage error) print one line ``error: ...`` and exit with
status 2, never a traceback.
"""
from __future__ import annotations

import sys

import click

from stabkit.errors import ConfigError
from stabkit_cli.algos import algos
from stabkit_cli.bounds import bounds
from stabkit_cli.pair import pair


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="stabkit")
def cli():
    """Measure how stable federated-learning algorithms are, with paired trajectories."""


cli.add_command(pair)
cli.add_command(algos)
cli.add_command(bounds)


def main(argv=None) -> None:
    try:
        code = cli.main(args=argv, prog_name="stabkit", standalone_mode=False)
    except ConfigError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    if isinstance(code, int) and code:  # ctx.exit(n) in non-standalone mode returns n
        sys.exit(code)
