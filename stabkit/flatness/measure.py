"""All scalar sharpness measures of a batch of models, with every choice recorded (in
:class:`~stabkit.flatness.settings.SharpnessSettings`).

:func:`measure` returns one column per measure (arrays over the Q models): ``loss`` F(theta),
``lambda_max`` ... ``lambda_5`` is ``lambda_k`` (Lanczos), ``lambda_ratio`` = lambda_max / lambda_k,
``lambda_min_ritz`` (the smallest Ritz value: exact only where the Krylov space was exhausted),
``lanczos_iters``, ``lanczos_residual`` (relative residual of lambda_max), ``lanczos_converged``,
``trace`` and ``trace_se`` (Hutchinson), ``sam_<r>`` and ``avg_<r>`` / ``avg_<r>_se`` per radius r.
"""
from __future__ import annotations

import torch

from stabkit.engine.memory import require_memory
from stabkit.engine.threads import threads_for
from stabkit.flatness.hessian import hutchinson, lanczos
from stabkit.flatness.objective import Objective
from stabkit.flatness.settings import SharpnessSettings
from stabkit.flatness.sharpness import average_sharpness, sam_sharpness


def radius_name(r: float) -> str:
    return f"{r:g}"


def measure(obj: Objective, theta: torch.Tensor, s: SharpnessSettings, spectrum_only: bool = False,
            threads: int | None = None) -> dict:
    """Every measure of models ``theta [Q, d]`` under objective ``obj`` (``spectrum_only``: loss and the
    Lanczos columns only, e.g. for many client models); ``threads``: a run's thread count (None: the policy's
    count now, which measures the idle CPUs for 50 ms)."""
    Q, d = theta.shape
    require_memory(s.probes * d * theta.element_size(), f"the {s.probes:,} Hutchinson probes of {d:,} parameters",
                   "use fewer --probes", theta.device)
    with threads_for(obj.flops, threads):
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
