"""``stabkit report DIR``: combine a sweep's jobs into one table, analyse each against the bounds, plot."""
from __future__ import annotations

import click

from stabkit.errors import ConfigError
from stabkit.sweep import REPORT_FORMATS as FORMATS
from stabkit_cli.help import Choice, renamed, renamed_value


@click.command()
@click.argument("sweep_dir")
@click.option("--out", default=None, help="output folder: the report (default DIR/report)")
@click.option("--format", "old_fmt", type=Choice(FORMATS), default=None, hidden=True, expose_value=False,
              callback=renamed("--format", "--table-format", "--format names what a command prints"))
@click.option("--table-format", "fmt", type=Choice(FORMATS), default="csv", show_default=True,
              help="file format of the tidy table (report/metrics.csv or .parquet)")
@click.option("--bootstrap", default=50, show_default=True, type=int, help="bootstrap resamples for the fit CIs")
@click.option("--no-plot", is_flag=True, help="tables only")
@click.option("--html", is_flag=True, help="also the atlas's kind of page: index.html (sortable tables, figures "
              "inline), cells.csv, cells.md")
@click.pass_context
def report(ctx, sweep_dir, out, fmt, bootstrap, no_plot, html):
    """Combine all jobs of a sweep into one tidy table, run the bounds analysis on each, draw comparisons.

    \b
    Example (after `stabkit sweep ... --out runs/sweep`):
      stabkit report runs/sweep --html
    """
    fmt = renamed_value(ctx, "--table-format", fmt)
    if bootstrap < 0:
        raise ConfigError(f"invalid bootstrap={bootstrap}: a non-negative integer")
    from pathlib import Path

    from stabkit.store.outdir import output_dir
    from stabkit.sweep.report import sweep_report  # imported on use: plotting is slow to import

    with output_dir(out or Path(sweep_dir) / "report") as target:  # checked first, removed if refused
        paths = sweep_report(sweep_dir, target, fmt=fmt, bootstrap=bootstrap, plot=not no_plot)
    click.echo(f"table: {paths['table']}\njobs: {paths['jobs']}\nbounds: {paths['bounds']}")
    for job, parts in paths["missing"].items():
        click.echo(f"job {job} lacks " + "; ".join(f"{part} ({why})" for part, why in parts.items()))
    if paths.get("figures"):
        click.echo(f"figures: {', '.join(str(p) for p in paths['figures'])}")
    if html:
        from stabkit.atlas import sweep_page

        click.echo(f"page: {sweep_page(sweep_dir, out)['page']}")


command = report
