"""What ``stabkit sharpness`` and ``stabkit landscape`` measure, checked without torch: their settings
(``SharpnessSettings``, ``LandscapeSettings``) and the saved run they read (``open_saved``: its config, the
saved round, its pairs' model files present).

Nothing here imports torch (about 1.5 s of start-up), so a bad option or a damaged run directory is refused
in well under a second; what needs the models' values or the task's data (a model file that cannot be read,
a radius beyond the models' norm, a fraction too small for the data) is checked once they are loaded.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from stabkit.config.runconfig import RunConfig
from stabkit.config.taskoptions import SEED_LIMIT
from stabkit.engine.memory import require_memory
from stabkit.errors import require
from stabkit.store.rundir import RunDir
from stabkit.store.saved_models import saved_pairs, saved_rounds
from stabkit.trajectories import TRAJ

# Ceilings of the Monte-Carlo and ascent knobs: the standard errors shrink as 1/sqrt(n), so 10,000 probes or
# directions put them at 1% of one sample's spread, and projected ascent has converged long before 1,000 steps;
# beyond, a mistyped exponent (--probes 10^8) would allocate hundreds of GB or run for days.
LIMITS = {"probes": 10_000, "directions": 10_000, "sam_steps": 1_000}
SPAN_LIMIT = 100.0  # random directions have the model's filter norms: a span of 100 is 100 x the model's size


@dataclass(frozen=True)
class SharpnessSettings:
    """How sharpness is measured (written beside the numbers, e.g. ``RUN/sharpness.json``)."""

    radii: tuple = (0.01, 0.05, 0.1)  # absolute radii of SAM and average-direction sharpness
    sam_steps: int = 10  # projected-ascent steps after SAM's first step
    directions: int = 20  # Monte-Carlo directions of the average-direction sharpness
    top: int = 5  # eigenvalues by Lanczos: lambda_max ... lambda_top
    lanczos_iters: int = 60  # at most this many Lanczos iterations (HVPs)
    lanczos_tol: float = 1e-3  # stop when every top residual is below this fraction of |lambda_max|
    probes: int = 100  # Hutchinson probes (0: no trace)
    fraction: float = 1.0  # of every client's training samples (a fixed subset, the same for both runs)
    seed: int = 0  # of the Lanczos start, the probes and the directions

    def __post_init__(self):
        require(len(self.radii) > 0 and all(isinstance(r, (int, float)) and 0 < r < math.inf for r in self.radii),
                "radius", list(self.radii), "finite radii > 0 (the SAM ball and the average-direction sphere)")
        require(isinstance(self.seed, int) and 0 <= self.seed < SEED_LIMIT, "seed", self.seed,
                "an integer in [0, 2**64)")
        for name in ("sam_steps", "directions", "top", "lanczos_iters"):
            value = getattr(self, name)
            require(isinstance(value, int) and value >= 1, name, value, "a positive integer")
        require(isinstance(self.probes, int) and self.probes >= 0, "probes", self.probes, "an integer >= 0")
        require(0 < self.lanczos_tol < 1, "lanczos_tol", self.lanczos_tol, "a number in (0, 1)")
        require(0 < self.fraction <= 1, "fraction", self.fraction, "a fraction in (0, 1]")
        for name, limit in LIMITS.items():
            require(getattr(self, name) <= limit, name, getattr(self, name), f"at most {limit:,} (the standard "
                    "errors shrink as 1/sqrt(n): 10,000 samples give 1% of one sample's spread; SAM's ascent "
                    "converges in tens of steps)")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["radii"] = list(self.radii)
        return d


@dataclass(frozen=True)
class LandscapeSettings:
    """What is drawn and how (all recorded in the output). A grid that alone would not fit in this machine's
    memory is refused with the other bad values, before anything is loaded."""

    round: Optional[int] = None  # None: the last saved round
    pair: int = 0
    traj: str = "a"
    points: int = 21  # grid points per axis (2-D surfaces) and along the 1-D slices
    span: float = 1.0  # random directions: a, b in [-span, span] (filter-normalised units)
    seed: int = 0  # of the random directions: the same for every run compared
    orthogonalise: bool = False  # d2 <- d2 - proj_{d1} d2 (Li et al. draw them independently)
    fraction: float = 1.0  # of every client's training samples and of the test set
    margin: float = 0.3  # model plane: margin around the projected models, relative to their extent
    segment: tuple = (-0.5, 1.5)  # paired slice: s range of x_T + s (x'_T - x_T)
    plane: bool = True  # the model plane (needs a replay of rounds 1..T)

    def __post_init__(self):
        require(isinstance(self.points, int) and self.points >= 3, "points", self.points, "an integer >= 3")
        require(0 < self.span <= SPAN_LIMIT, "span", self.span, f"a positive number at most {SPAN_LIMIT:g} (the grid "
                "is [-span, span]^2 in filter-normalised units: span s moves the model s times its own size, and "
                "far beyond that the losses overflow)")
        require(isinstance(self.pair, int) and self.pair >= 0, "pair", self.pair, "a pair index (an integer >= 0)")
        require(isinstance(self.seed, int) and 0 <= self.seed < SEED_LIMIT, "seed", self.seed,
                "an integer in [0, 2**64)")
        require(0 < self.fraction <= 1, "fraction", self.fraction, "a fraction in (0, 1]")
        require(self.traj in TRAJ, "traj", self.traj, "a or b")
        require(self.margin >= 0, "margin", self.margin, "a non-negative number")
        require(self.segment[0] < self.segment[1], "segment", list(self.segment), "lo < hi")
        require(self.round is None or (isinstance(self.round, int) and self.round >= 0), "round", self.round,
                "a saved round (a non-negative integer)")
        require_memory(grid_bytes(self.points), f"a {self.points} x {self.points} landscape grid",
                       "choose fewer --points")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["segment"] = list(self.segment)
        return d


def grid_bytes(points: int) -> float:
    """Memory of a ``points x points`` grid: the coordinates (two meshgrid arrays and their stack, float64)
    and the train and test losses at every point (float64)."""
    return float(points) ** 2 * 8 * (4 + 2 * 2)


@dataclass(frozen=True)
class SavedRun:
    """A run directory whose models of one saved round are measured: its config, that round and the number
    of pairs whose two models are there (checked by :func:`open_saved`)."""

    path: Path
    cfg: RunConfig
    round: int
    pairs: int


def open_saved(run_dir, wanted: Optional[int] = None, pair: int = 0) -> SavedRun:
    """The run in ``run_dir`` at its saved round ``wanted`` (default: the last saved), refused in one line
    if its config.json is missing or damaged, it saved no models (or none of round ``wanted``), a model file
    is missing, or it saved no pair ``pair``."""
    run = RunDir(run_dir)
    require(run.has(RunDir.CONFIG), "run", str(run_dir), f"a run directory written by `stabkit pair` (no {RunDir.CONFIG})")
    cfg = RunConfig.from_dict(run.config)  # truncated or edited by hand: one line
    rounds = saved_rounds(run_dir)
    require(bool(rounds), "run", str(run_dir), "a run with saved models (run `stabkit pair` with --save-models)")
    T = rounds[-1] if wanted is None else wanted
    pairs = saved_pairs(run_dir, T)
    require(pair < pairs, "pair", pair, f"a pair index below {pairs} (the run's pairs)")
    return SavedRun(Path(run_dir), cfg, T, pairs)
