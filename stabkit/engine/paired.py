"""The paired engine: all clients of both trajectories of all R pairs advance as one batch.

Global models are ``x [R, 2, d]``; a round's clients are ``[R, 2, s, d]`` and their minibatch gradients
come from one ``vmap(grad)`` call per local step over all ``R*2*s`` clients. Randomness is coupled
(``stabkit.engine.sampling``): both trajectories of a pair draw the same S_t and minibatch positions; only the
data rows behind them differ (``stabkit.engine.perturbation``). The engine owns the knobs every algorithm
shares — per-round lr decay, gradient clipping, weight decay, per-client state bookkeeping — so an
algorithm file holds only its own update rules. A round calls the algorithm's hooks in order
(``client_init``, then per local step ``grad_point`` and ``client_step``, then ``client_final`` and
``server_update``; ``stabkit.algorithms.base``), carrying the local state between them.

Weight decay (``EngineSettings.weight_decay_placement``): ``direction`` (default, the reference codes' placement,
as ``torch.optim.SGD(weight_decay=wd)`` on the final local direction) hands the algorithm the clipped loss
gradient and adds ``lr_k * wd * y`` to every local step after the algorithm's own step, so no algorithm
coefficient scales the decay and no algorithm state (momenta, control variates, MimeLite's G_i) holds it;
``gradient`` (the FedSAGD paper's analysed reading) adds ``wd * y`` to every loss gradient the algorithm sees
(``ctx.process``), so FedCM/MoFedSAM scale it by alpha, FedANAG by 1 + beta, MimeLite by 1 - beta and G_i
carries it. With wd = 0 the two are the same run bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import numpy as np
import torch

from stabkit.algorithms.base import CLIENT_SENSITIVITIES, Algorithm, RoundContext, Step
from stabkit.engine.augment import crop_flip
from stabkit.engine.data import FederatedData
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.noise import gaussian
from stabkit.engine.perturbation import Neighbours, active_swap, removed_cohort
from stabkit.engine.rng import hash_keys
from stabkit.engine.sampling import batch_positions, client_order
from stabkit.engine.sensitivity import measured_sensitivity
from stabkit.engine.threads import threads_for


@dataclass(frozen=True)
class EngineSettings:
    """The run's knobs the engine reads, and only those (``stabkit.run.experiment`` takes them from the
    ``RunConfig``; the names and meanings are RunConfig's)."""

    seed: int  # keys every coupled random stream
    sampled_clients: int  # s, clients per round
    local_steps: int  # K
    batch_size: Union[int, str]  # or "full"
    client_lr: Callable  # t -> eta_l(t), RunConfig.client_lr: the one place the schedule is computed
    global_lr: float
    clip: Optional[float] = None
    weight_decay: float = 0.0
    weight_decay_placement: str = "direction"
    augment: str = "none"
    dp_noise: str = "coupled"  # stabkit.engine.noise: coupled | independent | off


@dataclass
class RoundRecord:
    """What one round measured, per pair (arrays of length R unless noted)."""

    rows: np.ndarray  # [R, 2, s] physical rows of the round's clients
    hit: np.ndarray  # the perturbation acted in this round
    theta_max: np.ndarray  # max raw minibatch-gradient norm, both trajectories
    theta_rms: np.ndarray  # rms of the same
    local: list = field(default_factory=list)  # (k, l1 [R, 2], l2 [R], l3 [R]) at requested rounds
    grad_evals: float = 1.0  # minibatch/full gradient evaluations per client per local step
    clients: object = None  # [R, 2, s, d] the round's final local models, when asked for (keep_clients)
    dp_sensitivity: object = None  # [R] DP algorithms: measured sensitivity, NaN where no client differs


PREFETCH_BYTES = 64 << 20  # gather a round's minibatches up front when they take at most this much memory
# A CPU round runs its pairs in chunks whose client tensors [R_c, 2, s, d] take at most CHUNK_BYTES, one
# chunk after another (a model larger than that keeps one batch). Above glibc's largest mmap threshold (32 MiB,
# stabkit.engine.alloc) every fresh tensor of a local step was a fresh mmap, faulted in page by page; below it
# the smaller working set still stays in cache. One thread, benchmarks/chunks.py: digits MLP at 245 pairs
# (47 MB tensors) 3.5-5.5 ms per pair-round and 130,000-310,000 page faults per round in one batch, 2.1 ms
# and none in chunks of 8-16 MiB; LeNet-5 (W2) at 8 pairs 1140-1395 ms per round in one batch, 962-1099 ms
# in chunks of 2 pairs (8 MiB).
CHUNK_BYTES = 8 << 20


@dataclass
class ChunkRound:
    """What one chunk of pairs' round returns: the new global models and server state of its pairs, the
    minibatch-gradient norms ``[K, R_c, 2, s]``, local discrepancies and (when asked) the final clients."""

    x: torch.Tensor
    server: dict
    norms: torch.Tensor
    local: list
    clients: object = None


class PairedEngine:
    """Holds the batched state of all pairs and advances it one round at a time."""

    def __init__(self, cfg: EngineSettings, algo: Algorithm, model: FlatModel, data: FederatedData,
                 nb: Neighbours, theta0: torch.Tensor):
        self.cfg, self.algo, self.model, self.data, self.nb = cfg, algo, model, data, nb
        self.threads = None  # intra-op threads of large ops (stabkit.engine.threads.run_threads; None: torch's)
        R, d = theta0.shape
        self.R, self.s, self.M = R, cfg.sampled_clients, nb.cmap.shape[2]
        # the population each trajectory's rules scale by: M, or [1, 2, 1] (M, M - 1) under remove-client
        counts = nb.population[0]
        self.num_clients = self.M if counts[0] == counts[1] else \
            torch.as_tensor(counts, dtype=theta0.dtype, device=theta0.device).reshape(1, 2, 1)
        self.x = theta0[:, None, :].expand(R, 2, d).clone()
        self.server, self.client_state = algo.init_state(self.x, data.num_rows)
        self.grad_evals = 0
        self.full_batch = cfg.batch_size == "full"
        batch = int(data.n_np.max()) if self.full_batch else cfg.batch_size
        self.step_flops = model.flops_per_sample(data.x[:1], data.y[:1]) * R * 2 * self.s * batch
        self.measure_sensitivity = CLIENT_SENSITIVITIES in algo.requires()  # a DP algorithm's, every round

    def round_rows(self, t: int) -> tuple:
        """Logical sample S_t ``[R, s]`` and the physical rows ``[R, 2, s]`` each trajectory trains on."""
        cfg, nb = self.cfg, self.nb
        order = client_order(cfg.seed, t, self.R, self.M)
        S = order[:, :self.s]
        rows = np.take_along_axis(nb.cmap, np.broadcast_to(S[:, None, :], (self.R, 2, self.s)), axis=2).copy()
        if nb.mode == "active":
            slot, repl = active_swap(nb, cfg.seed, t, self.s)
            rows[np.arange(self.R), 1, slot] = repl
        elif nb.mode == "remove-client":
            rows[:, 1] = removed_cohort(nb.perturbed_client, S, order)
        return S, rows

    def _batches(self, t: int, rows: np.ndarray) -> torch.Tensor:
        """Sample indices ``[R, 2, s, K, B]`` of round t; full batch: ``[R, 2, s, 1, n_max]``, padding -1."""
        sizes = self.data.n_np[rows]
        if self.full_batch:
            idx = np.arange(int(sizes.max()))
            idx = np.where(idx < sizes[..., None], idx, -1)[..., None, :]
        else:
            skip = None
            if self.nb.mode == "remove-sample":  # B's copy of i* lacks sample j*: A's order without it
                skip = np.where(rows == self.nb.perturbed_row[:, None, None],
                                self.nb.perturbed_position[:, None, None], sizes)
            idx = batch_positions(self.cfg.seed, t, sizes, self.cfg.local_steps, self.cfg.batch_size, skip)
        return torch.as_tensor(idx, device=self.x.device)

    def _hit(self, S: np.ndarray, rows: np.ndarray, idx: torch.Tensor) -> np.ndarray:
        """Whether the perturbation acted in the round, per pair: the swapped or removed client sampled, the
        replaced sample drawn by B, the removed sample drawn by A (active mode: always)."""
        nb = self.nb
        if nb.mode in ("population", "remove-client"):
            return (S == nb.perturbed_client[:, None]).any(axis=1)
        if nb.mode == "active":
            return np.ones(self.R, dtype=bool)
        if nb.mode in ("sample", "remove-sample"):
            j = 1 if nb.mode == "sample" else 0  # the trajectory that holds the sample
            in_slot = torch.as_tensor(rows[:, 1] == nb.perturbed_row[:, None], device=idx.device)
            drawn = (idx[:, j] == torch.as_tensor(nb.perturbed_position, device=idx.device)[:, None, None, None])
            return (in_slot[..., None, None] & drawn).flatten(1).any(1).cpu().numpy()
        return np.zeros(self.R, dtype=bool)

    def _process(self, g: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The engine's shared gradient treatment: norm clipping of the loss gradient, then (placement
        ``gradient`` only) weight decay."""
        if self.cfg.clip is not None:
            g = g * (self.cfg.clip / (g.norm(dim=-1, keepdim=True) + 1e-6)).clamp(max=1.0)
        if self.cfg.weight_decay and self.cfg.weight_decay_placement == "gradient":
            g = g + self.cfg.weight_decay * y
        return g

    def _decay(self, step: Step, y_new: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Placement ``direction``: the local step k becomes ``y - lr_k (direction + wd y)``."""
        wd = self.cfg.weight_decay
        if not wd or self.cfg.weight_decay_placement != "direction":
            return y_new
        return torch.add(y_new, y, alpha=-step.lr * wd)

    def _grad_fns(self, rows_t: torch.Tensor, idx: torch.Tensor):
        """Gradient closures for the round's clients: minibatch of step k, and full local data."""
        R, _, s = rows_t.shape
        d = self.x.shape[-1]
        model, data = self.model, self.data

        def batched(z, xb, yb, w):
            # clients that share their model (x_t broadcast, at the first local step) go as [R*2, s, d]
            theta = z.flatten(0, 1) if s > 1 and z.stride(2) == 0 else z.reshape(-1, d)
            g = model.grads(theta, xb.flatten(0, 2), yb.flatten(0, 2), None if w is None else w.flatten(0, 2))
            self.grad_evals += 1
            return g.reshape(R, 2, s, d)

        cache = {}

        def full(z):  # gathers each client's whole local data set on first use in the round
            if not cache:
                n = data.n[rows_t]
                full_idx = torch.arange(int(n.max()), device=idx.device).expand(R, 2, s, -1)
                own = torch.minimum(full_idx, n[..., None] - 1)  # a smaller client's padding repeats its last sample
                cache["batch"] = (*data.gather(rows_t, own), (full_idx < n[..., None]).to(self.x.dtype))
            return batched(z, *cache["batch"])

        if self.full_batch:
            return (lambda k: full), full
        if idx.numel() * data.x[0].numel() * data.x.element_size() <= PREFETCH_BYTES:
            # all K steps' minibatches in one gather, step-major so each step's slice is contiguous
            K = idx.shape[3]
            xs, ys = data.gather(rows_t.expand(K, R, 2, s), idx.movedim(3, 0))
            xs = self._augment(xs, np.arange(K))
            return (lambda k: (lambda z: batched(z, xs[k], ys[k], None))), full

        def step_batch(k):
            xb, yb = data.gather(rows_t, idx[..., k, :])
            return self._augment(xb[None], np.array([k]))[0], yb

        return (lambda k: (lambda z, b=step_batch(k): batched(z, *b, None))), full

    def _augment(self, x: torch.Tensor, steps: np.ndarray) -> torch.Tensor:
        """The run's coupled augmentation of minibatches ``[K, R, 2, s, B, ...]`` (identity for ``none``)."""
        if self.cfg.augment == "none":
            return x
        return crop_flip(x, self.cfg.seed, self._round, steps)

    def step(self, t: int, track_local: bool = False, keep_clients: bool = False) -> RoundRecord:
        """Run round t on both trajectories of every pair and return what it measured (``keep_clients``:
        with the clients' final local models, e.g. for their sharpness)."""
        with threads_for(self.step_flops, self.threads):
            return self._step(t, track_local, keep_clients)

    def _step(self, t: int, track_local: bool, keep_clients: bool = False) -> RoundRecord:
        cfg, R = self.cfg, self.R
        S, rows = self.round_rows(t)
        self._round = t
        idx = self._batches(t, rows)
        # measured on the state before the round (its own gradient evaluations are not the round's)
        sensitivity = measured_sensitivity(self, t, rows, idx) if self.measure_sensitivity else None
        self.grad_evals = 0
        size = self.pairs_per_chunk()
        parts = [self._chunk_round(t, slice(a, min(a + size, R)), S[a:a + size], rows[a:a + size], idx[a:a + size],
                                   track_local, keep_clients) for a in range(0, R, size)]
        join = (lambda ts, dim=0: ts[0]) if len(parts) == 1 else (lambda ts, dim=0: torch.cat(ts, dim))
        self.x = join([p.x for p in parts])
        self.server = {**self.server, **{n: join([p.server[n] for p in parts]) for n in parts[0].server}}
        norms = join([p.norms for p in parts], 1)  # [K, R, 2, s]
        local = [(k, *map(np.concatenate, zip(*(p.local[i][1:] for p in parts))))  # (k, l1, l2, l3) over pairs
                 for i, (k, *_) in enumerate(parts[0].local)]
        theta_max = norms.amax(dim=(0, 2, 3)).cpu().numpy()
        theta_rms = norms.pow(2).mean(dim=(0, 2, 3)).sqrt().cpu().numpy()
        grad_evals = self.grad_evals / (cfg.local_steps * len(parts))
        return RoundRecord(rows, self._hit(S, rows, idx), theta_max, theta_rms, local, grad_evals,
                           join([p.clients for p in parts]) if keep_clients else None, sensitivity)

    def pairs_per_chunk(self) -> int:
        """Pairs whose round runs as one batch: on the CPU as many as fit ``CHUNK_BYTES`` of client tensors
        (``[R_c, 2, s, d]``; all of them where one pair's do not fit), elsewhere all of them. Chunks run one
        after another, each its own batch; every op of a round is per model, so a chunked round computes what
        one batch computes, equal to float rounding (fewer models per kernel call may select another CPU
        kernel; ``tests/engine/test_chunks.py``)."""
        per_pair = 2 * self.s * self.x.shape[-1] * self.x.element_size()
        if self.x.device.type != "cpu" or per_pair > CHUNK_BYTES:
            return self.R
        return min(self.R, CHUNK_BYTES // per_pair)

    def _chunk_round(self, t: int, pairs: slice, S: np.ndarray, rows: np.ndarray, idx: torch.Tensor,
                     track_local: bool, keep_clients: bool) -> ChunkRound:
        """Round t of the pairs ``pairs`` (their sample S_t, clients' physical rows and minibatch positions): the
        algorithm's hooks in order, the carried per-client state written back for those pairs."""
        ctx, at_rows, step_grad = self.context(t, pairs, self.x[pairs], S, rows, idx)
        uploads, new_client, y, norms, local_disc = self.clients_round(ctx, step_grad, track_local)
        means = self.algo.combine(ctx, uploads)
        for name, value in self._declared("client_state", new_client).items():
            self.client_state[name][at_rows] = value
        x_new, new_server = self.algo.server_update(ctx, means)
        return ChunkRound(x_new, self._declared("server_state", new_server), torch.stack(norms), local_disc,
                          y if keep_clients else None)

    def context(self, t: int, pairs, x: torch.Tensor, S: np.ndarray, rows: np.ndarray, idx: torch.Tensor):
        """``(ctx, at_rows, step_grad)`` of round t for the pairs ``pairs`` (a slice, whose server state is then
        a view, or an index array) with global models ``x`` ``[R_c, 2, d]``, their sample S_t, their clients' physical rows
        ``[R_c, 2, s_c]`` and minibatch positions: the round's :class:`RoundContext` (state gathered for those
        pairs and rows), the index of those rows in the per-client state, and each local step's
        minibatch-gradient oracle."""
        cfg, d = self.cfg, x.shape[-1]
        R, _, s = rows.shape
        rows_t = torch.as_tensor(rows, device=x.device)
        dev = rows_t.device
        pair_index = np.arange(pairs.start, pairs.stop) if isinstance(pairs, slice) else pairs
        pair_t = torch.as_tensor(pair_index, device=dev)
        at_rows = (pair_t[:, None, None], torch.arange(2, device=dev)[None, :, None], rows_t)
        sel = pairs if isinstance(pairs, slice) else pair_t
        step_grad, full_grad = self._grad_fns(rows_t, idx)
        lr = cfg.client_lr(t)
        lrs = tuple(self.algo.local_lrs(lr, cfg.local_steps))
        ctx = RoundContext(
            t=t, x=x, x_clients=x[:, :, None, :].expand(R, 2, s, d), server={n: v[sel] for n, v in self.server.items()},
            client={n: v[at_rows] for n, v in self.client_state.items()}, lr=lr, lrs=lrs,
            lr_sum=float(sum(lrs)), global_lr=cfg.global_lr, local_steps=cfg.local_steps,
            num_clients=self.num_clients, sampled=self.s, full_grad_fn=full_grad, process=self._process,
            gaussian=lambda purpose: gaussian(cfg.seed, purpose, pair_index, t, d, cfg.dp_noise, x),
            pairs=range(pairs.start, pairs.stop) if isinstance(pairs, slice) else pair_index, cohort=S,
            keys=hash_keys(cfg.seed, "host", pair_index, t))
        return ctx, at_rows, step_grad

    def clients_round(self, ctx: RoundContext, step_grad, track_local: bool = False):
        """The clients' part of a round: ``client_init``, the K local steps, ``client_final``. Returns
        ``(uploads, new client state, final local models, gradient norms per step, local discrepancies)``."""
        algo, cfg = self.algo, self.cfg
        y, local = algo.client_init(ctx)
        self._declared("local_state", local)
        start = y
        norms, local_disc = [], []
        for k in range(cfg.local_steps):
            if track_local:
                local_disc.append((k, *_local_discrepancy(y)))
            step = Step(k, ctx.lrs[k], step_grad(k))
            g = step.grad(algo.grad_point(ctx, step, y, local))
            norms.append(torch.linalg.vector_norm(g, dim=-1))  # g.norm's kernel without its Python wrapper
            y_new, local = algo.client_step(ctx, step, y, local, ctx.process(g, y))
            y = self._decay(step, y_new, y)
        if track_local:
            local_disc.append((cfg.local_steps, *_local_discrepancy(y)))
        uploads, new_client = algo.client_final(ctx, start, y, self._declared("local_state", local))
        return uploads, new_client, y, norms, local_disc

    def try_round(self) -> None:
        """Run round 1 once and put the state back exactly (a plug-in algorithm's hooks are checked by
        :class:`~stabkit.engine.contract.CheckedAlgorithm` before the run writes anything)."""
        saved = (self.x.clone(), {n: v.clone() for n, v in self.server.items()},
                 {n: v.clone() for n, v in self.client_state.items()})
        try:
            self.step(0)
        finally:
            self.x, self.server, self.client_state = saved
            self.grad_evals = 0

    def _declared(self, kind: str, state: dict) -> dict:
        """``state`` unchanged, after checking that it holds exactly the algorithm's declared ``kind``
        (``local_state``, ``client_state`` or ``server_state``): every hook returns its state whole."""
        names = getattr(self.algo, kind)
        if state.keys() != set(names):
            raise TypeError(f"{self.algo.name}: {kind.replace('_', ' ')} {sorted(state)} differs from its "
                            f"declared {kind} {sorted(names)}")
        return state

    def discrepancy(self) -> np.ndarray:
        """||x_t - x'_t||_2 per pair."""
        return (self.x[:, 0] - self.x[:, 1]).norm(dim=-1).cpu().numpy()


def _local_discrepancy(y: torch.Tensor):
    """Local discrepancy estimators at one local step (the FedSAGD paper's App. A.4 "maximum discrepancy
    among client models", read three ways).

    L1 ``[R, 2]``: max distance between two clients of the same run (shared start);
    L2 ``[R]``: max over slots of the cross-run distance in the same slot;
    L3 ``[R]``: max over all cross-run client pairs.
    """
    l1 = torch.cdist(y, y, compute_mode=_EXACT).amax(dim=(-1, -2))
    l2 = (y[:, 0] - y[:, 1]).norm(dim=-1).amax(dim=-1)
    l3 = torch.cdist(y[:, 0], y[:, 1], compute_mode=_EXACT).amax(dim=(-1, -2))
    return l1.cpu().numpy(), l2.cpu().numpy(), l3.cpu().numpy()


_EXACT = "donot_use_mm_for_euclid_dist"  # exact differences: identical clients give exactly 0
