"""``stabkit sharpness RUN [--round T]``: scalar sharpness of a run's saved global models (docs/flatness.md, L3).

Every pair and trajectory saved after round T: Hessian lambda_max ... lambda_5 (Lanczos, convergence
reported), lambda_max / lambda_5, Hutchinson trace with its standard error, SAM sharpness by projected
ascent and average-direction sharpness at each ``--radius``. Writes ``sharpness_round_T.csv`` and
``.json`` (settings) to the run directory (or ``--out``) and prints the means over pairs.
"""
from __future__ import annotations

from pathlib import Path

import click

DEFAULT_RADII = "0.01,0.05,0.1"


@click.command()
@click.argument("run_dir")
@click.option("--round", "round_", type=int, default=None, help="saved round T (default: the last saved)")
@click.option("--radius", "radii", default=DEFAULT_RADII, show_default=True,
              help="comma-separated radii r > 0 of the SAM ball and the average-direction sphere")
@click.option("--probes", default=100, show_default=True, help="Hutchinson probes (0: no trace)")
@click.option("--directions", default=20, show_default=True, help="Monte-Carlo directions, average sharpness")
@click.option("--sam-steps", default=10, show_default=True, help="projected-ascent steps")
@click.option("--tol", default=1e-3, show_default=True, help="Lanczos: relative residual of lambda_max ... lambda_5")
@click.option("--fraction", default=1.0, show_default=True, help="fixed fraction of every client's samples")
@click.option("--seed", default=0, show_default=True, help="seed of the Lanczos start, probes and directions")
@click.option("--out", default=None, help="output folder of the tables (default RUN)")
def sharpness(run_dir, round_, radii, probes, directions, sam_steps, tol, fraction, seed, out):
    """Hessian spectrum, trace, SAM and average-direction sharpness of saved global models.

    \b
    Example (the final models `stabkit pair` saves by default):
      stabkit sharpness runs/quick --probes 20
    """
    from stabkit.errors import ConfigError
    from stabkit.flatness.settings import SharpnessSettings, open_saved
    from stabkit.store.fserrors import undone_on_fs_error
    from stabkit.store.outdir import check_writable

    try:
        radii_t = tuple(float(r) for r in radii.split(","))  # an empty item ("0.01,,0.05") is refused too
    except ValueError:
        raise ConfigError(f"invalid radius={radii!r}: comma-separated numbers > 0, no empty item") from None
    settings = SharpnessSettings(radii=radii_t, sam_steps=sam_steps, directions=directions, probes=probes,
                                 lanczos_tol=tol, fraction=fraction, seed=seed)
    run = open_saved(run_dir, round_)
    check_writable(out if out else run_dir)  # before the measurement, not after it
    # the options, the run's config and its model files are checked: only now torch (~1.5 s) is imported
    from stabkit.flatness.saved import measure_saved
    from stabkit.run.experiment import rebuilt_engine

    with undone_on_fs_error(out if out else run_dir):  # a full disk: one line, no half-written table left
        df, path = measure_saved(run, settings, rebuilt_engine, Path(out) if out else None)
    cols = [c for c in df.columns if c not in ("round", "pair", "traj") and not c.endswith("_se")]
    click.echo(df.groupby("traj")[cols].mean().T.to_string(float_format=lambda v: f"{v:.4g}"))
    click.echo(f"written to {path}")


command = sharpness
