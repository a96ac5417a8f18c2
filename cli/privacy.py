"""``stabkit privacy RUN``: a DP run's epsilons (audit <= measured <= accountant) and the DP => stability bound."""
from __future__ import annotations

import click

from stabkit.store.rundir import RunDir
from stabkit_cli.help import Choice

FORMATS = ("table", "json")


@click.command()
@click.argument("run")
@click.option("--delta", default=1e-5, show_default=True, type=float, help="the delta of (epsilon, delta)-DP, in (0, 1)")
@click.option("--audit", "audit_dir", default=None, metavar="AUDIT_DIR",
              help="a folder written by `stabkit audit` for this algorithm and schedule: its lower bound joins the "
                   "sandwich")
@click.option("--format", "fmt", type=Choice(FORMATS), default="table", show_default=True,
              help="printed output: a table or JSON (keys epsilon_accountant, epsilon_measured, epsilon_audit_lower, "
                   "delta, ...)")
@click.option("--plot", is_flag=True, help="draw the sandwich to RUN/figures/privacy.png (and .pdf)")
def privacy(run, delta, audit_dir, fmt, plot):
    """Epsilon of a DP run: the accountant's, the one its measured sensitivities spent, and an audit's lower bound.

    \b
    Example (a DP run and an audit of its schedule, as in docs/privacy.md):
      stabkit privacy run --audit audit --plot
    """

    from stabkit.privacy.report import plot_sandwich, privacy_report, report_text
    from stabkit.run.privacy_facts import implied_schedule
    from stabkit.store.atomic import strict_json

    run = RunDir(run)  # one reading of the run's files for the schedule, the report and the figure
    report = privacy_report(run, delta, audit_dir, implied=implied_schedule(run))
    click.echo(strict_json(report, indent=2) if fmt == "json" else report_text(report))
    if plot:
        paths = plot_sandwich(report, run.file(RunDir.FIGURES))
        click.echo(f"figure: {paths[0]}", err=fmt == "json")


command = privacy
