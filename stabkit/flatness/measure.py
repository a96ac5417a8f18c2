"""All scalar sharpness measures of a batch of models, with every choice recorded.

:func:`measure` returns one column per measure (arrays over the Q models): ``loss`` F(theta),
``lambda_max`` ... ``lambda_5`` is ``lambda_k`` (Lanczos), ``lambda_ratio`` = lambda_max / lambda_k,
``lambda_min_ritz`` (the smallest Ritz value: exact only where the Krylov space was exhausted),
``lanczos_iters``, ``lanczos_residual`` (relative residual of lambda_max), ``lanczos_converged``,
``trace`` and ``trace_se`` (Hutchinson), ``sam_<r>`` and ``avg_<r>`` / ``avg_<r>_se`` per radius r.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch

from stabkit.config.taskoptions import SEED_LIMIT
from stabkit.engine.memory import require_memory
from stabkit.engine.threads import threads_for
from stabkit.errors import require
from stabkit.flatness.hessian import hutchinson, lanczos
from stabkit.flatness.objective import Objective
from stabkit.flatness.sharpness import average_sharpness, sam_sharpness

# Ceilings of the Monte-Carlo and ascent knobs: the standard errors shrink as 1/sqrt(n), so 10,000 probes or
# directions put them at 1% of one sample's spread, and projected ascent has converged long before 1,000 steps;
# beyond, a mistyped exponent (--probes 10^8) would allocate hundreds of GB or run for days.
LIMITS = {"probes": 10_000, "directions": 10_000, "sam_steps": 1_000}


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


def radius_name(r: float) -> str:
    return f"{r:g}"


def measure(obj: Objective, theta: torch.Tensor, s: SharpnessSettings, spectrum_only: bool = False) -> dict:
    """Every measure of models ``theta [Q, d]`` under objective ``obj`` (``spectrum_only``: loss and the
    Lanczos columns only, e.g. for many client models)."""
    Q, d = theta.shape
    require_memory(s.probes * d * theta.element_size(), f"the {s.probes:,} Hutchinson probes of {d:,} parameters",
                   "use fewer --probes", theta.device)
    with threads_for(obj.flops):
        return _measure(obj, theta, s, spectrum_only)


def _measure(obj: Objective, theta: torch.Tensor, s: SharpnessSettings, spectrum_only: bool) -> dict:
    spec = lanczos(obj.hvp, theta, k=s.top, max_iter=s.lanczos_iters, tol=s.lanczos_tol, seed=s.seed)
    k = spec.top[:, -1]
    out = {"loss": obj.loss(theta).cpu().numpy(), "lambda_max": spec.top[:, 0], f"lambda_{s.top}": k,
           "lambda_ratio": spec.top[:, 0] / k, "lambda_min_ritz": spec.smallest,
           "lanczos_iters": spec.iterations, "lanczos_residual": spec.residual_max,
           "lanczos_converged": spec.converged}
    if spectrum_only:
        return out
    if s.probes:
        tr = hutchinson(obj, theta, s.probes, seed=s.seed + 1)
        out["trace"], out["trace_se"] = tr.mean, tr.se
    sam = sam_sharpness(obj, theta, s.radii, s.sam_steps, seed=s.seed + 2)
    avg, avg_se = average_sharpness(obj, theta, s.radii, s.directions, seed=s.seed + 3)
    for i, r in enumerate(s.radii):
        out[f"sam_{radius_name(r)}"] = sam[:, i]
        out[f"avg_{radius_name(r)}"], out[f"avg_{radius_name(r)}_se"] = avg[:, i], avg_se[:, i]
    return out
