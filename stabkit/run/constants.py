"""Estimate the constants the papers' bounds need, from a run and its task (stored as constants.json).

The papers give no estimators; these are plug-ins for their constants (the FedSAGD paper's Theta of
Lemma C.1, Libra's and FedInit's L, sigma_l, sigma_g, mu and D):

* ``theta_max`` / ``theta_rms``: the max / rms raw minibatch-gradient norm logged every round (Θ_emp);
* ``L``: largest |Hessian eigenvalue| of f (trajectory A's training objective) by power iteration with
  Hessian-vector products at snapshot iterates, max over snapshots, plus the weight decay;
* ``sigma_l2`` (at the run's batch size, exact for sampling without replacement:
  (n-b)/(b(n-1)) times the per-sample variance) and ``sigma_l2_sample`` (batch size 1), max over clients;
* ``sigma_g2`` / ``sigma_g2_mean``: max / mean over clients of ||grad F_i - grad f||^2, max over snapshots;
* ``G``: max per-sample gradient norm; ``U``: max per-sample loss (both at the snapshots);
* ``L_G``, ``F0``, ``f_star``, ``mu_pl`` from the logged curves (``max ||grad f||``, ``f(x_0) - min f``,
  ``min f``, ``min ||grad f||^2 / (2 (f - f_star))``).

Per-sample quantities use at most ``max_clients`` training clients (evenly spaced) to bound the cost, and
on a large data set (more than ``MAX_SAMPLES`` training samples) every estimate uses a fixed subset of each
client's data (``stabkit.engine.evalsubset``, reweighted so it still estimates f = mean_i F_i), so the
estimation stays a bounded cost after the run, like the per-round evaluation (``stabkit.run.evalbudget``);
``samples`` in the result says how many were used. Small data sets (the digits demo) use all their data.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from stabkit.config.runconfig import RunConfig
from stabkit.engine.data import FederatedData
from stabkit.engine.evalsubset import keep_per_owner
from stabkit.engine.flatmodel import FlatModel

if TYPE_CHECKING:  # the logged metrics come as a frame; this module does not need pandas itself
    import pandas as pd

POWER_ITERATIONS = 50
POWER_TOL = 1e-4  # stop when ||Hv|| changes by less than this (relative)
MAX_SAMPLES = 2048  # training samples the estimates use at most (a fixed per-client subset beyond)


PER_SAMPLE_BYTES = 256 << 20  # per-sample gradients held at once (whole clients where they fit)


def _power_iterations(model, thetas, x, y, w, iters: int, seeds: list) -> list:
    """Largest |eigenvalue| of the Hessian of the weighted loss at every row of ``thetas [S, d]``: power
    iterations on Hessian-vector products, all rows in one batched product per iteration. Row i starts from
    ``randn`` seeded ``seeds[i]`` and stops on its own, when ``||Hv||`` changes by at most ``POWER_TOL``
    (relative) or after ``iters`` products: the values of one power iteration per row."""
    starts = [torch.randn(thetas.shape[1], generator=torch.Generator().manual_seed(s), dtype=thetas.dtype)
              for s in seeds]
    V = torch.stack(starts).to(thetas.device)
    V = V / V.norm(dim=1, keepdim=True)
    norms, result = [0.0] * len(seeds), [None] * len(seeds)
    active = list(range(len(seeds)))
    for _ in range(iters):
        HV = model.hvps(thetas[active], V[active], x, y, w.expand(len(active), -1))
        new = HV.norm(dim=1).tolist()
        still = []
        for row, i in enumerate(active):
            if new[row] == 0.0:
                result[i] = 0.0
                continue
            V[i] = HV[row] / new[row]
            if abs(new[row] - norms[i]) <= POWER_TOL * new[row]:
                result[i] = new[row]
            else:
                norms[i] = new[row]
                still.append(i)
        active = still
        if not active:
            break
    return [norms[i] if r is None else r for i, r in enumerate(result)]


def _client_batches(sizes: list, cap: int) -> list:
    """Consecutive groups of clients (indices into ``sizes``) whose samples add up to at most ``cap``; a
    client larger than ``cap`` is a group of its own."""
    groups, current, total = [], [], 0
    for i, n in enumerate(sizes):
        if current and total + n > cap:
            groups.append(current)
            current, total = [], 0
        current.append(i)
        total += n
    return groups + [current] if current else groups


def estimate_constants(cfg: RunConfig, model: FlatModel, data: FederatedData, weights: torch.Tensor,
                       snapshots: list, df: pd.DataFrame, max_clients: int = 20) -> dict:
    """Constants of the run ``cfg`` (its batch size, weight decay and seed are used) from its ``model`` and
    ``data``, the per-sample ``weights [N]`` over all flat training samples with which sum_n w_n loss_n = f
    (trajectory A of pair 0: ``Evaluator.population_weights(0)``), ``snapshots`` (flat parameter vectors of
    that trajectory) and the logged metrics ``df``.

    Batched as the engine batches clients: the power iterations of all snapshots share one Hessian-vector
    product per iteration, the gradient of f and the losses of all snapshots are one evaluation, and the
    chosen clients' per-sample gradients are computed for as many whole clients at once as
    ``PER_SAMPLE_BYTES`` holds (each sample a client of one sample of the engine's batched gradient)."""
    out = _from_metrics(df)
    keep, owners, w_all = _samples(data, weights, cfg.seed)
    x_all, y_all = data.flat_x[keep], data.flat_y[keep]
    clients = np.unique(owners.cpu().numpy())
    chosen = clients[np.linspace(0, len(clients) - 1, min(max_clients, len(clients))).round().astype(int)]
    thetas = torch.stack(snapshots)
    w_norm = (w_all / w_all.sum())[None]
    L = max(_power_iterations(model, thetas, x_all, y_all, w_norm, POWER_ITERATIONS,
                              [cfg.seed + i for i in range(len(snapshots))]), default=0.0)
    grad_f, losses, _ = model.evaluate(thetas, x_all, y_all, w_norm.expand(len(thetas), -1))
    masks = [owners == int(c) for c in chosen]
    rows = [torch.nonzero(m).flatten() for m in masks]
    cap = max(1, PER_SAMPLE_BYTES // (model.d * thetas.element_size()))
    b = cfg.batch_size
    sl2 = sl2_1 = sg2 = sg2_mean = G = 0.0
    for s, theta in enumerate(thetas):
        diffs = []
        for group in _client_batches([len(r) for r in rows], cap):
            at = torch.cat([rows[j] for j in group])
            per_all = model.per_sample_grads(theta, x_all[at], y_all[at], chunk=cap)
            G = max(G, float(per_all.norm(dim=1).max()))
            for per, j in zip(torch.split(per_all, [len(rows[j]) for j in group]), group):
                n = int(data.n_np[int(chosen[j])])  # the client's size (the subset, if any, estimates its variance)
                grad_i = per.mean(0)
                var1 = float((per - grad_i).pow(2).sum(1).mean())
                batch = n if b == "full" else min(int(b), n)
                var_b = var1 * (n - batch) / (batch * (n - 1)) if n > 1 else 0.0
                sl2, sl2_1 = max(sl2, var_b), max(sl2_1, var1)
                diffs.append(float((grad_i - grad_f[s]).pow(2).sum()))
        sg2, sg2_mean = max(sg2, max(diffs)), max(sg2_mean, float(np.mean(diffs)))
    out.update(L=L + cfg.weight_decay, sigma_l2=sl2, sigma_l2_sample=sl2_1, sigma_g2=sg2, sigma_g2_mean=sg2_mean,
               G=G, U=float(losses.max()), snapshots=len(snapshots), samples=len(keep))
    return out


# Closed-form constants a task can know (the quadratic's, ``Task.constants``) -> the constants.json keys they set.
EXACT_KEYS = {"L": "L", "mu": ("mu_sc", "mu_pl"), "sigma_g2": "sigma_g2", "sigma_g2_mean": "sigma_g2_mean",
              "f_star": "f_star", "convex": "convex"}


def run_constants(cfg: RunConfig, task, model: FlatModel, data: FederatedData, weights: torch.Tensor,
                  snapshots: dict, df: pd.DataFrame) -> dict:
    """The constants of a finished run of ``cfg`` on ``task``: estimated at the parameter ``snapshots``
    ``{round: theta}`` (``weights``: trajectory A's population weights), exact where the task's closed form
    is that of the run's model."""
    estimated = estimate_constants(cfg, model, data, weights, [snapshots[r] for r in sorted(snapshots)], df)
    if cfg.model in (None, task.default_model):
        estimated = with_exact(estimated, task.constants, cfg.weight_decay)
    return estimated


def with_exact(estimated: dict, exact: dict, weight_decay: float = 0.0) -> dict:
    """``estimated`` with the task's closed-form constants ``exact`` in place of the estimates of the same
    quantities, so the bounds are evaluated with the true L, μ, σ_g² (the atlas's quadratic); each replaced
    estimate stays beside it as ``<key>_estimated``, and ``exact`` lists the keys that are closed form.
    Weight decay λ adds λ/2 ||x||² to f: λ joins L and μ; f* is then not the task's and stays estimated."""
    out, closed = dict(estimated), []
    for name, keys in EXACT_KEYS.items():
        if name not in exact or (name == "f_star" and weight_decay):
            continue
        value = exact[name] + weight_decay if name in ("L", "mu") else exact[name]
        for key in (keys,) if isinstance(keys, str) else keys:
            if key in out:
                out[f"{key}_estimated"] = out[key]
            out[key] = value
            closed.append(key)
    if closed:
        out["exact"] = closed
    return out


def _from_metrics(df: pd.DataFrame) -> dict:
    """The constants the logged metrics give: Θ (max, rms), f*, F0, L_G and the PL constant μ."""
    out = {}
    out["theta_max"] = float(np.nanmax(df["theta_max"])) if "theta_max" in df else None
    out["theta_rms"] = float(np.sqrt(np.nanmean(df["theta_rms"] ** 2))) if "theta_rms" in df else None
    train = df.dropna(subset=["train_loss_a"])
    f = train.groupby("round")["train_loss_a"].mean()
    g2 = train.groupby("round")["grad_norm_sq_a"].mean()
    out["f_star"] = float(f.min())
    out["F0"] = float(f.iloc[0] - f.min())
    out["L_G"] = float(np.sqrt(g2.max()))
    excess = f - f.min()
    ok = excess > 1e-8 * max(1.0, abs(f.min()))
    out["mu_pl"] = float((g2[ok] / (2 * excess[ok])).min()) if ok.any() else None
    return out


def _samples(data: FederatedData, weights: torch.Tensor, seed: int) -> tuple:
    """``(keep, owners, w)``: the flat training samples the estimates use (those of positive weight, or a fixed
    subset of every client's samples reweighted per client when there are more than ``MAX_SAMPLES``), their
    owners and weights."""
    keep = torch.nonzero(weights > 0).flatten()
    if len(keep) > MAX_SAMPLES:  # a fixed subset of every client's samples, reweighted per client
        sub = keep_per_owner(data.flat_owner[keep].cpu().numpy(), data.origin, MAX_SAMPLES / len(keep), seed,
                             "constants")
        keep = keep[torch.as_tensor(sub, device=keep.device)]
        owners = data.flat_owner[keep]
        counts = torch.bincount(owners, minlength=data.num_rows).to(weights.dtype)
        return keep, owners, 1.0 / (counts[owners] * int((counts > 0).sum()))
    return keep, data.flat_owner[keep], weights[keep]
