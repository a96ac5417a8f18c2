"""The paired engine: all clients of both trajectories of all R pairs advance as one batch.

Global models are ``x [R, 2, d]``; a round's clients are ``[R, 2, s, d]`` and their minibatch gradients
come from one ``vmap(grad)`` call per local step over all ``R*2*s`` clients. Randomness is coupled
(``stabkit.sampling``): both trajectories of a pair draw the same S_t and minibatch positions; only the
data rows behind them differ (``stabkit.perturbation``). The engine owns the knobs every algorithm
shares — per-round lr decay, gradient clipping, weight decay, per-client state bookkeeping — so an
algorithm file holds only its own update rules.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from stabkit.algorithms.base import Algorithm, RoundContext
from stabkit.config import RunConfig
from stabkit.data import FederatedData
from stabkit.flatmodel import FlatModel
from stabkit.perturbation import Neighbours, active_swap
from stabkit.sampling import batch_positions, sample_clients


@dataclass
class RoundRecord:
    """What one round measured, per pair (arrays of length R unless noted)."""

    rows: np.ndarray  # [R, 2, s] physical rows of the round's clients
    hit: np.ndarray  # the perturbation acted in this round
    theta_max: np.ndarray  # max raw minibatch-gradient norm, both trajectories
    theta_rms: np.ndarray  # rms of the same
    local: list = field(default_factory=list)  # (k, l1 [R, 2], l2 [R], l3 [R]) at requested rounds


class PairedEngine:
    """Holds the batched state of all pairs and advances it one round at a time."""

    def __init__(self, cfg: RunConfig, algo: Algorithm, model: FlatModel, data: FederatedData,
                 nb: Neighbours, theta0: torch.Tensor):
        self.cfg, self.algo, self.model, self.data, self.nb = cfg, algo, model, data, nb
        R, d = theta0.shape
        self.R, self.s, self.M = R, cfg.sampled_clients, nb.cmap.shape[2]
        self.x = theta0[:, None, :].expand(R, 2, d).clone()
        zeros = lambda *shape: torch.zeros(*shape, d, dtype=theta0.dtype, device=theta0.device)
        self.server = {name: zeros(R, 2) for name in algo.server_state}
        self.client_state = {name: zeros(R, 2, data.num_rows) for name in algo.client_state}
        self.full_batch = cfg.batch_size == "full"

    def round_rows(self, t: int) -> tuple:
        """Logical sample S_t ``[R, s]`` and the physical rows ``[R, 2, s]`` each trajectory trains on."""
        cfg, nb = self.cfg, self.nb
        S = sample_clients(cfg.seed, t, self.R, self.M, self.s)
        rows = np.take_along_axis(nb.cmap, np.broadcast_to(S[:, None, :], (self.R, 2, self.s)), axis=2).copy()
        if nb.mode == "active":
            slot, repl = active_swap(nb, cfg.seed, t, self.s)
            rows[np.arange(self.R), 1, slot] = repl
        return S, rows

    def _batches(self, t: int, rows: np.ndarray):
        """Sample indices ``[R, 2, s, K, B]`` (or full-batch indices and mask) for round t."""
        sizes = self.data.n_np[rows]
        if self.full_batch:
            n_max = int(sizes.max())
            idx = np.broadcast_to(np.arange(n_max), (*rows.shape, n_max))
            mask = torch.as_tensor(idx < sizes[..., None], dtype=self.x.dtype, device=self.x.device)
            return torch.as_tensor(np.ascontiguousarray(idx), device=self.x.device), mask
        idx = batch_positions(self.cfg.seed, t, sizes, self.cfg.local_steps, self.cfg.batch_size)
        return torch.as_tensor(idx, device=self.x.device), None

    def _hit(self, S: np.ndarray, rows: np.ndarray, idx: torch.Tensor) -> np.ndarray:
        nb = self.nb
        if nb.mode == "population":
            return (S == nb.perturbed_client[:, None]).any(axis=1)
        if nb.mode == "active":
            return np.ones(self.R, dtype=bool)
        if nb.mode == "sample":
            in_slot = torch.as_tensor(rows[:, 1] == nb.perturbed_row[:, None], device=idx.device)
            drawn = (idx[:, 1] == torch.as_tensor(nb.perturbed_position, device=idx.device)[:, None, None, None])
            return (in_slot[..., None, None] & drawn).flatten(1).any(1).cpu().numpy()
        return np.zeros(self.R, dtype=bool)

    def step(self, t: int, track_local: bool = False) -> RoundRecord:
        """Run round t on both trajectories of every pair and return what it measured."""
        cfg, R, s, d = self.cfg, self.R, self.s, self.x.shape[-1]
        S, rows = self.round_rows(t)
        idx, mask = self._batches(t, rows)
        rows_t = torch.as_tensor(rows, device=self.x.device)
        ctx = RoundContext(
            t=t, x=self.x, x0=self.x[:, :, None, :].expand(R, 2, s, d), server=self.server,
            client={n: v[torch.arange(R)[:, None, None], torch.arange(2)[None, :, None], rows_t]
                    for n, v in self.client_state.items()},
            lr=cfg.lr * cfg.lr_decay ** t, global_lr=cfg.global_lr, local_steps=cfg.local_steps,
            num_clients=self.M)
        y = self.algo.client_start(ctx, ctx.x0.clone())
        norms = []
        local = []
        for k in range(cfg.local_steps):
            if track_local:
                local.append((k, *_local_discrepancy(y)))
            if self.full_batch:
                xb, yb = self.data.gather(rows_t, idx)
                g_fn = lambda z: self.model.grads(z.reshape(-1, d), xb.flatten(0, 2), yb.flatten(0, 2),
                                                  mask.flatten(0, 2)).reshape(R, 2, s, d)
            else:
                xb, yb = self.data.gather(rows_t, idx[..., k, :])
                g_fn = lambda z: self.model.grads(z.reshape(-1, d), xb.flatten(0, 2),
                                                  yb.flatten(0, 2)).reshape(R, 2, s, d)
            ctx.grad_fn = g_fn
            g = g_fn(y)
            gnorm = g.norm(dim=-1)
            norms.append(gnorm)
            if cfg.clip is not None:
                g = g * (cfg.clip / (gnorm + 1e-6)).clamp(max=1.0)[..., None]
            if cfg.weight_decay:
                g = g + cfg.weight_decay * y
            y = self.algo.local_step(ctx, y, g, k)
        if track_local:
            local.append((cfg.local_steps, *_local_discrepancy(y)))
        uploads, new_client = self.algo.client_finish(ctx, y)
        means = {name: u.mean(dim=2) for name, u in uploads.items()}
        for name, value in new_client.items():
            self.client_state[name][torch.arange(R)[:, None, None], torch.arange(2)[None, :, None], rows_t] = value
        self.x, new_server = self.algo.server_update(ctx, means)
        self.server = {**self.server, **new_server}
        norms = torch.stack(norms)  # [K, R, 2, s]
        theta_max = norms.amax(dim=(0, 2, 3)).cpu().numpy()
        theta_rms = norms.pow(2).mean(dim=(0, 2, 3)).sqrt().cpu().numpy()
        return RoundRecord(rows, self._hit(S, rows, idx), theta_max, theta_rms, local)

    def discrepancy(self) -> np.ndarray:
        """||x_t - x'_t||_2 per pair."""
        return (self.x[:, 0] - self.x[:, 1]).norm(dim=-1).cpu().numpy()


def _local_discrepancy(y: torch.Tensor):
    """Local discrepancy estimators at one local step (fedsagd.md §1.6).

    L1 ``[R, 2]``: max distance between two clients of the same run (shared start);
    L2 ``[R]``: max over slots of the cross-run distance in the same slot;
    L3 ``[R]``: max over all cross-run client pairs.
    """
    l1 = torch.cdist(y, y, compute_mode=_EXACT).amax(dim=(-1, -2))
    l2 = (y[:, 0] - y[:, 1]).norm(dim=-1).amax(dim=-1)
    l3 = torch.cdist(y[:, 0], y[:, 1], compute_mode=_EXACT).amax(dim=(-1, -2))
    return l1.cpu().numpy(), l2.cpu().numpy(), l3.cpu().numpy()


_EXACT = "donot_use_mm_for_euclid_dist"  # exact differences: identical clients give exactly 0
