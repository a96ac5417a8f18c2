"""Landscape figures for the fedswa_flatness recipe (`make recipes` runs it after the sweeps).

Trains FedAvg, FedSAM, FedSWA and FedMoSWA with the recipe's base configuration at its most heterogeneous
Dirichlet level, saves the final global models (``stabkit.store.saved_models``) and draws them side by side
with ``stabkit landscape --plot`` (same direction seed, shared colour levels); copies the PNGs to
``figures/recipes/fedswa_flatness/landscape/``.

    .venv/bin/python figures/recipes/fedswa_flatness_landscape.py [RUNS_DIR]
"""
import shutil
import sys
from pathlib import Path

from stabkit.config.runconfig import RunConfig
from stabkit.run.experiment import PairedRun
from stabkit.store.saved_models import save_models
from stabkit.sweep import load_spec
from stabkit_cli.main import main as stabkit

ALGOS = ("fedavg", "fedsam", "fedswa", "fedmoswa")
HERE = Path(__file__).parent


def main(runs: Path) -> None:
    spec = load_spec(HERE / "fedswa_flatness.yaml")
    alpha = min(spec.product["dirichlet_alpha"])
    for algo in ALGOS:
        cfg = RunConfig.from_dict({**spec.base, "algo": algo, "dirichlet_alpha": alpha, "sharpness_rounds": [],
                                   "constants": False})
        run = PairedRun(cfg)
        run.run(runs / algo)
        save_models(runs / algo, cfg.rounds, run.engine.x, run.model.names, run.model.shapes)
    out = runs / "landscape"
    try:
        stabkit(["landscape", *(str(runs / a) for a in ALGOS), "--plot", "--out", str(out)])
    except SystemExit as e:
        if e.code:
            raise
    dest = HERE / "fedswa_flatness" / "landscape"
    dest.mkdir(parents=True, exist_ok=True)
    for png in out.glob("*.png"):
        shutil.copy(png, dest / png.name)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs/recipes/fedswa_flatness_landscape"))
