"""``stabkit`` command line: thin wrappers that parse, validate, call the library and print a summary.

Every module of this package that defines a click command as ``command`` is a subcommand (so adding a
command is adding a file). User mistakes (``ConfigError`` or a click usage error) and a file system that
refuses a write (full, read-only, name too long: ``stabkit.store.fserrors``) print one line ``error: ...`` and
exit with status 2, never a traceback. An option that takes one value given twice (two ``--wrap``s, two
``--tune``s) is refused by name, as a key given twice is everywhere else: click would keep the last silently.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

import click

import stabkit_cli
from stabkit.engine import machine
from stabkit.errors import ConfigError
from stabkit_cli.help import Commands

machine.apply()  # before any command imports torch (stabkit.engine.machine)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="stabkit")
def cli():
    """Measure how stable federated-learning algorithms are, with paired trajectories."""


for _info in pkgutil.iter_modules(stabkit_cli.__path__):
    if _info.name in ("main", "__main__"):
        continue
    _command = getattr(importlib.import_module(f"stabkit_cli.{_info.name}"), "command", None)
    if isinstance(_command, click.Command):
        cli.add_command(_command)


def refuse_repeated(args: list) -> None:
    """ConfigError naming the first single-valued option of the subcommand in ``args`` that is given twice."""
    name = next((a for a in args if not a.startswith("-")), None)
    command = cli.commands.get(name)
    if command is None:
        return
    single = {opt: p for p in command.params if isinstance(p, click.Option) and not (p.is_flag or p.multiple
                                                                                     or p.count) for opt in p.opts}
    seen: dict = {}
    rest = iter(args[args.index(name) + 1:])
    for arg in rest:
        if arg == "--":
            break
        opt, sep, value = arg.partition("=")
        if opt not in single:
            continue
        value = value if sep else next(rest, "")
        param = single[opt]
        if param.name in seen:
            raise ConfigError(f"invalid option {opt}: given twice ({seen[param.name]!r} and {value!r}); give it once")
        seen[param.name] = value


def main(argv=None) -> None:
    try:
        refuse_repeated(list(sys.argv[1:] if argv is None else argv))
        code = cli.main(args=argv, prog_name="stabkit", standalone_mode=False)
    except ConfigError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except OSError as e:  # the file system refused a write a command did not expect to fail: still one line
        from stabkit.store.fserrors import is_fs_refusal, refusal
        if not is_fs_refusal(e):
            raise
        click.echo(f"error: {refusal(e)}", err=True)
        sys.exit(2)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    if isinstance(code, int) and code:  # ctx.exit(n) in non-standalone mode returns n
        sys.exit(code)
