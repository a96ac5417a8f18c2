"""``stabkit audit``: a lower bound on a DP algorithm's epsilon from trials run as independent-noise pairs.

Takes the options of ``stabkit pair`` (the algorithm, its DP layer and the schedule to audit) plus ``--trials``.
"""
from __future__ import annotations

import click

from stabkit_cli.help import Choice, Sectioned
from stabkit_cli.pair import SECTIONS, _options, build_config

FORMATS = ("table", "json")


@click.command(cls=Sectioned, sections=[("Audit", ["trials", "delta", "out", "fmt", "help"]), *SECTIONS])
@_options
@click.option("--hp", "hp_items", multiple=True, metavar="NAME=VALUE", help="algorithm hyperparameter (repeatable)")
@click.option("--config", "config_path", default=None, help="run config file (.yaml/.json); options override it")
@click.option("--trials", default=10000, show_default=True, type=int,
              help="trials N: pairs with independent noise, run as one batch (the bound is computed on N/2)")
@click.option("--delta", default=1e-5, show_default=True, type=float, help="the delta of (epsilon, delta)-DP")
@click.option("--out", default=None, help="output folder: audit.json (for `stabkit privacy RUN --audit`)")
@click.option("--format", "fmt", type=Choice(FORMATS), default="table", show_default=True,
              help="printed output: a line or JSON")
@click.pass_context
def audit(ctx, hp_items, config_path, trials, delta, out, fmt, **params):
    """Audit a DP algorithm: epsilon_lower from a threshold test on N trials (Jagielski, Ullman & Oprea 2020).

    \b
    Example (DP-FedAvg on the quadratic, 1,000 trials; docs/privacy.md has the whole study):
      stabkit audit --algo dp_fedavg --task quadratic --clients 10 --clients-per-round 10 --rounds 3 --trials 1000
    """
    explicit = {k for k in params if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT}
    cfg = build_config(params, explicit, config_path, hp_items)
    from stabkit.privacy.accountant import check_delta
    from stabkit.privacy.audit import check_trials

    check_trials(trials, check_delta(delta))  # refused before torch is imported or anything is written
    if out is not None:
        from stabkit.privacy.report import check_new_audit_dir

        check_new_audit_dir(out)
    from stabkit.run.audit import run_audit
    from stabkit.store.atomic import strict_json

    record = run_audit(cfg, trials, delta, out)
    if fmt == "json":
        click.echo(strict_json(record, indent=2))
        return
    click.echo(f"epsilon_lower = {record['epsilon_lower']:.4g} at delta = {delta:g} from {trials} trials "
               f"(FPR {record['fpr']:.4g} <= {record['fpr_upper']:.4g}, FNR {record['fnr']:.4g} <= "
               f"{record['fnr_upper']:.4g}, one-sided Clopper-Pearson 95%); the accountant's epsilon: "
               f"{record['epsilon_accountant']:.4g}" + (f"; written to {out}" if out else ""))


command = audit
