"""``stabkit bounds RUN [RUN...]``: fits, instantiated bounds, tightness and Libra's excess risk of runs."""
from __future__ import annotations

import contextlib
from pathlib import Path

import click

from stabkit.errors import ConfigError
from stabkit_cli.help import Choice

FORMATS = ("table", "csv", "json")


def _text(a) -> str:
    row = a.summary_row()
    lines = [f"== {a.path}  [{row['label']}, --perturb {row['perturb']}, T = {row['T']}, {row['pairs']} pairs]",
             f"D_T = {row['D_T']:.4g} ± {row['D_T_std']:.3g} (mean ± std over pairs); "
             f"best law: {row['best_law'] or '– (no fit)'}"]
    lines += [a.fit.table()] if a.fit else []
    lines += [f"{part}: {why}" for part, why in a.missing.items()]
    rho, (lo, hi) = row["sat.rho"], row["sat.rho.ci"]
    if "Gamma" in row and a.fit:
        lines.append(f"saturation rate: fitted rho = {rho:.4g} [{lo:.3g}, {hi:.3g}] vs predicted Gamma = "
                     f"{row['Gamma']:.4g} (ratio {row['rho/Gamma']:.3g}); fitted level {row['sat.level']:.4g} vs "
                     f"predicted plateau {row['predicted_level']:.4g}")
    bounds = a.bound_rows()
    if bounds:
        lines.append(f"{'bound':<34} {'on':<12} {'form':<10} {'valid':<6} {'bound_T':>10} {'bound/meas':>10} "
                     f"{'holds':<6} {'undef':>5} failed conditions")
        for b in bounds:
            lines.append(f"{b['bound']:<34} {b['quantity']:<12} {b['form']:<10} {str(b['valid']):<6} "
                         f"{b['bound_T']:>10.4g} {b['tightness_T']:>10.3g} {_holds(b['holds']):<6} "
                         f"{b['undefined']:>5} {b['failed']}")
        for b in bounds:
            if b["undefined_cause"]:
                lines.append(f"  {b['bound']} ({b['form']}) undefined at {b['undefined']} of {row['T']} rounds: "
                             f"{b['undefined_cause']}" + (f"; holds = {b['holds']} on the rounds where it is defined"
                                                          if b["holds"] is not None else "; defined at no round"))
    if a.libra:
        lines.append(f"Libra (Corollary 1 on measured s_t, g_t; L = {a.libra['L']:.3g}, C = {a.libra['C']:.3g}): "
                     f"T* = {a.libra['T_star']} ({a.libra['regime']}); measured test-loss minimum at "
                     f"t = {a.libra['test_loss_argmin']}")
        lines.append(_libra_fit(a.libra))
    return "\n".join(lines)


def _holds(h) -> str:
    return "undef" if h is None else str(h)


def _libra_fit(lib: dict) -> str:
    """The excess-risk fit line (Corollary 1's shape, free constants): its T* only when both coefficients are
    identified (off their bound 0)."""
    coefs = ", ".join(f"{k} = {lib[k]:.3g}" + _unconstrained(lib[k], lib[k + ".ci"]) for k in ("phi1", "phi2"))
    head = f"Libra excess-risk fit e_t = phi1 s_t + phi2 g_t (phi >= 0): {coefs}"
    if lib["fit_degenerate"]:
        what = ("the stability term is not identified by this run" if "phi1" in lib["fit_on_bound"]
                else "the gradient term is not identified by this run")
        return f"{head}: degenerate ({' and '.join(lib['fit_on_bound'])} on its bound 0; {what}), no fitted T*"
    return f"{head}: fitted T* = {lib['T_star_fit']} ({lib['regime_fit']})"


def _unconstrained(value: float, ci) -> str:
    """The 95% interval printed beside a constrained (phi >= 0) estimate belongs to the *unconstrained*
    least-squares estimate: said so, and when it excludes the value shown, said plainly why."""
    lo, hi = ci
    text = f" (the unconstrained estimate's 95% CI [{lo:.3g}, {hi:.3g}]"
    if lo <= value <= hi or not (lo == lo and hi == hi):
        return text + ")"
    return text + ": the constraint phi >= 0 moved the fit outside it)"


def _flat(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, tuple):
            out[f"{k}.lo"], out[f"{k}.hi"] = v
        else:
            out[k] = v
    return out


def _run_and_label(arg: str) -> tuple:
    """``RUN`` or ``RUN=LABEL`` (a directory whose own name contains '=' is taken whole)."""
    run, sep, label = arg.rpartition("=")
    if not sep or Path(arg).is_dir():
        return arg, ""
    if not label.strip():
        raise ConfigError(f"invalid run={arg!r}: RUN=LABEL needs a non-empty label")
    return run, label.strip()


@click.command()
@click.argument("runs", nargs=-1, required=True, metavar="RUN[=LABEL]...")
@click.option("--plot", is_flag=True, help="draw the figures (PNG and PDF)")
@click.option("--out", default=None, help="output folder of the figures, with --plot (default: RUN/figures for one "
                                          "run, else ./bounds-figures)")
@click.option("--log", is_flag=True, help="log scale for the discrepancy panel")
@click.option("--format", "fmt", type=Choice(FORMATS), default="table", show_default=True,
              help="printed output: a table, CSV or JSON")
@click.option("--bootstrap", default=200, type=int, help="bootstrap resamples over pairs for the fit CIs")
def bounds(runs, plot, out, log, fmt, bootstrap):
    """Fit growth laws to measured discrepancy, evaluate the papers' bounds, and report how they compare.

    \b
    Example (the demo's two runs, as committed; add --plot for the figures):
      stabkit bounds figures/demo/data/fedsagd figures/demo/data/fedavg
    """
    if bootstrap < 0:
        raise ConfigError(f"invalid bootstrap={bootstrap}: a non-negative integer")
    for flag, given in (("--log", log), ("--out", out is not None)):
        if given and not plot:  # they only shape the figures: never accepted and ignored without a word
            raise ConfigError(f"invalid {flag.lstrip('-')}={out if flag == '--out' else True!r}: {flag} applies to "
                              f"the figures; add --plot")
    import pandas as pd  # imported on use, as the analysis below: `stabkit --help` does not pay for them

    from stabkit.analysis.labels import distinct_labels
    from stabkit.analysis.run_analysis import analyze
    from stabkit.store.atomic import strict_json
    from stabkit.store.outdir import check_writable, output_dir
    from stabkit.store.rundir import RunDir

    runs, labels = zip(*(_run_and_label(r) for r in runs))
    target = Path(out) if out else (RunDir(runs[0]).file(RunDir.FIGURES) if len(runs) == 1 else Path("bounds-figures"))
    if plot:
        check_writable(target)  # an unwritable figure directory fails before the analysis, not after it
    # a refused analysis leaves no empty --out behind
    with output_dir(target) if plot and out else contextlib.nullcontext():
        analyses = [analyze(r, bootstrap=bootstrap, label=label) for r, label in zip(runs, labels)]
    for a, given, default in zip(analyses, labels, distinct_labels([a.df.attrs["config"] for a in analyses])):
        if not given and not a.df.attrs["config"].get("label"):
            a.label = default
    if fmt == "table":
        click.echo("\n\n".join(_text(a) for a in analyses))
    elif fmt == "csv":
        click.echo(pd.DataFrame([_flat(a.summary_row()) for a in analyses]).to_csv(index=False), nl=False)
    else:
        payload = [{"summary": a.summary_row(), "bounds": a.bound_rows(),
                    "fits": a.fit.summary_row() if a.fit else None, "missing": a.missing} for a in analyses]
        click.echo(strict_json(payload, indent=2))
    if plot:
        from stabkit.analysis.plots import plot_all

        click.echo(f"figures: drawing into {target} ...", err=True)  # the stage after the tables (a few seconds)
        paths = plot_all(analyses, target, log=log)
        click.echo(f"figures: {', '.join(str(p) for p in paths if p.suffix == '.png')}", err=fmt != "table")


command = bounds
