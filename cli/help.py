"""Help a person reads: options under titled sections, fixed choices refused in the house's one line, the
command list untruncated, and old option spellings kept one release with a one-line notice.

* :class:`Sectioned` -- a command whose ``--help`` lists its options under titled sections. The sections are one
  table per command (``sections=[(title, [parameter names]), ...]`` given to ``click.command``); an option in no
  section is listed last under "Other options", so a new option is never hidden, only unsorted until it is
  added to its section.
* :class:`Choice` -- ``click.Choice`` (the choices shown in ``--help``) whose refusal is the house's one line
  ``invalid NAME='VALUE': one of A, B, C``.
* :class:`Commands` -- the top-level group: each command's whole first sentence, wrapped, never cut at ``...``.
* :func:`renamed` -- an option's old spelling, accepted for one release with a one-line notice on stderr.
"""
from __future__ import annotations

import click

from stabkit.errors import ConfigError

OTHER = "Other options"


class Choice(click.Choice):
    """A fixed set of values: shown as ``[a|b|c]`` in ``--help``; anything else is refused as
    ``invalid NAME='VALUE': one of a, b, c`` (NAME: the option's name, as the config file spells it)."""

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        name = param.opts[0].lstrip("-").replace("-", "_") if param is not None else "value"
        raise ConfigError(f"invalid {name}={value!r}: one of {', '.join(map(str, self.choices))}")


class Sectioned(click.Command):
    """A command whose options are listed under titled sections (``sections``: ``[(title, [names])]``, the
    names are the parameters' names as the command function receives them; ``help`` is ``--help``)."""

    def __init__(self, *args, sections=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.sections = [(title, list(names)) for title, names in sections]

    def section_of(self, param) -> str:
        return next((title for title, names in self.sections if param.name in names), OTHER)

    def format_options(self, ctx, formatter):
        """Each section's options in the table's order, then the options of no section in theirs."""
        help_option = self.get_help_option(ctx)
        records = {"help" if p is help_option else p.name: p.get_help_record(ctx) for p in self.get_params(ctx)}
        listed = {name for _, names in self.sections for name in names}
        shown = set()  # a name in two sections (a command extending another's table) is listed in the first
        for title, names in self.sections + [(OTHER, [n for n in records if n not in listed])]:
            rows = [records[n] for n in names if records.get(n) is not None and n not in shown]
            shown.update(names)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class Commands(click.Group):
    """The top-level group: the command list gives each command's first sentence whole (wrapped)."""

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def renamed(old: str, new: str, why: str):
    """A callback for the hidden option ``old``: its value goes to the parameter of ``new`` (which must be
    declared after it, as ``expose_value=False`` options are), with one line on stderr saying to use ``new``."""

    def callback(ctx, param, value):
        if value is not None and ctx.get_parameter_source(param.name) != click.core.ParameterSource.DEFAULT:
            click.echo(f"note: {old} is deprecated and will be removed in the next release; use {new} ({why})",
                       err=True)
            ctx.meta[f"renamed:{new}"] = value
        return value

    return callback


def renamed_value(ctx, new: str, value):
    """The value of the option ``new``, or the one given under its old spelling (:func:`renamed`)."""
    return ctx.meta.get(f"renamed:{new}", value)
