"""What an unlearning method may use: :class:`UnlearnContext`.

Built from a finished ``--perturb remove-client`` run: its task, model and neighbours rebuilt exactly as the
run built them, trajectory A's final models x_T^A (``x_final``), the initial models x_0 (``x0``) and the
forgotten client of every pair (``forgotten``). Three kinds of work, each counted in client gradient steps:

* :meth:`UnlearnContext.algorithm_rounds`: rounds of the run's own algorithm (its rules, lrs, cohorts of s
  clients) on the federation without the forgotten client, from any start, numbered after the run's rounds
  so their cohorts and minibatches are fresh draws of the coupled streams;
* :meth:`UnlearnContext.local_sgd`: plain local SGD (or ascent) of given clients with the run's batch size,
  clipping and weight decay (descent only), minibatches from the coupled streams under the method's own key;
* :meth:`UnlearnContext.stored_updates`: the client updates the run stored (``--store-updates``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from stabkit.engine import rng
from stabkit.engine.paired import PairedEngine
from stabkit.engine.sampling import batch_positions
from stabkit.run.assembly import engine_settings
from stabkit.run.loop import EngineRounds, run_rounds
from stabkit.run.preflight import checked_algorithm
from stabkit.store.updates import load_updates


class ClientSteps:
    """The round loop's callback counting the client gradient steps of the rounds run, per pair: each round's
    gradient evaluations per local step, times the local steps and the sampled clients."""

    def __init__(self, pairs: int, local_steps: int, sampled: int):
        self.total, self.local_steps, self.sampled = np.zeros(pairs), local_steps, sampled

    def on_round_end(self, run, state) -> None:
        self.total += state.record.grad_evals * self.local_steps * self.sampled


class UnlearnContext:
    """The run ``run`` (a built ``PairedRun``) in ``run_dir`` with A's final models ``x_final [R, d]``."""

    def __init__(self, run, run_dir, x_final: torch.Tensor):
        cfg = run.cfg
        self.cfg, self.run_dir = cfg, Path(run_dir)
        self.model, self.data, self.nb = run.model, run.data, run.nb
        self.x0 = run.engine.x[:, 0].clone()  # [R, d] every pair's initial model (both trajectories')
        self.x_final = x_final
        self.forgotten = run.nb.perturbed_client.copy()  # [R] the removed client (its row in A's federation)
        self.pairs, self.rounds = self.x0.shape[0], cfg.rounds
        self.sampled, self.local_steps, self.num_clients = cfg.sampled_clients, cfg.local_steps, run.engine.M

    def lr(self, t: int) -> float:
        """The run's client lr of round t (0-based)."""
        return float(self.cfg.client_lr(t))

    def algorithm_rounds(self, x_start: torch.Tensor, rounds: int, after: int | None = None) -> tuple:
        """``rounds`` rounds of the run's algorithm (fresh state) from ``x_start [R, d]`` on the remaining
        clients (trajectory B's federation and coupling), numbered from ``after`` (default: the run's T) on;
        ``(x [R, d], client gradient steps [R])``."""
        eng = self.engine(x_start)
        steps = ClientSteps(self.pairs, self.local_steps, self.sampled)
        run_rounds(EngineRounds((eng,), rounds, done=self.rounds if after is None else after), [steps])
        return eng.x[:, 1].clone(), steps.total

    def engine(self, x_start: torch.Tensor, seed: int | None = None) -> PairedEngine:
        """A fresh engine of the run (its algorithm built anew) at ``x_start [R, d]``; ``seed``: another seed
        for the coupled streams (cohorts, minibatches, noise), the neighbours and the start kept."""
        cfg = self.cfg if seed is None else self.cfg.replace(seed=seed)
        return PairedEngine(engine_settings(cfg), checked_algorithm(cfg), self.model, self.data, self.nb,
                            x_start.clone())

    def local_sgd(self, theta: torch.Tensor, rows: np.ndarray, steps: int, lr: float, key: tuple,
                  ascent: bool = False) -> torch.Tensor:
        """``steps`` local steps of clients ``rows [N]`` (physical rows) from ``theta [N, d]``: descent
        ``y - lr (clip(g) + wd y)`` or ascent ``y + lr clip(g)``; minibatches of the run's size drawn from the
        coupled streams keyed by ``key`` (a tuple of ints and strings naming the call, e.g. the method and the
        round), full batches under ``--batch-size full``."""
        cfg, data = self.cfg, self.data
        rows = np.asarray(rows, dtype=np.int64)
        rows_t = torch.as_tensor(rows, device=theta.device)
        sizes = data.n_np[rows]
        if cfg.batch_size == "full":
            n = int(sizes.max())
            full = torch.arange(n, device=theta.device).expand(len(rows), n)
            own = torch.minimum(full, data.n[rows_t][:, None] - 1)
            xb, yb = data.gather(rows_t, own)
            w = (full < data.n[rows_t][:, None]).to(theta.dtype)
            batches = [(xb, yb, w)] * steps
        else:
            seed = int(rng.hash_keys(cfg.seed, "unlearn", *[_word(k) for k in key]))
            both = np.stack([sizes, sizes], 1)[:, :, None]  # [N, 2, 1]: the engine's shape, one trajectory used
            idx = batch_positions(seed, 0, both, steps, cfg.batch_size)[:, 0, 0]  # [N, steps, B]
            idx = torch.as_tensor(idx, device=theta.device)
            batches = [(*data.gather(rows_t, idx[:, k]), None) for k in range(steps)]
        y = theta.clone()
        for xb, yb, w in batches:
            g = self.model.grads(y, xb, yb, w)
            if cfg.clip is not None:
                g = g * (cfg.clip / (g.norm(dim=-1, keepdim=True) + 1e-6)).clamp(max=1.0)
            y = y + lr * g if ascent else y - lr * (g + cfg.weight_decay * y)
        return y

    def stored_updates(self, t: int) -> tuple:
        """Round t's (1-based) cohort ``[R, s]`` and A's client updates ``[R, s, d]`` (``--store-updates``)."""
        cohort, update = load_updates(self.run_dir, t)
        return cohort, update.to(device=self.x0.device, dtype=self.x0.dtype)


def _word(k) -> int:
    """A key part as an integer counter (strings by their hash)."""
    return int(rng.hash_keys(0, k)) & 0x7FFFFFFFFFFFFFFF if isinstance(k, str) else int(k)
