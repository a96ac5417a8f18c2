"""The baseline: FedAvg as typical research code writes it — one Python loop over clients.

Per round: for each sampled client, ``copy.deepcopy`` the global ``nn.Module``, train it K steps with
``torch.optim.SGD`` on minibatches sliced from shuffled epochs, and average the clients' state dicts. One trajectory,
no pairing. It runs on the same task, model and hyperparameters as the stabkit run it is compared with,
on the same device and in the same process, at the intra-op thread count its caller sets (``benchmarks/run.py``
times it at 1 and 2 threads and compares against its best), with no thread policy of its own: plain research
code has none.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from stabkit.config.runconfig import RunConfig
from stabkit.models.registry import build_model
from stabkit.tasks.base import Task


class PerClientLoop:
    """Plain FedAvg over ``task``'s training clients with ``cfg``'s s, K, B and lr."""

    def __init__(self, cfg: RunConfig, task: Task, seed: int = 0):
        torch.manual_seed(seed)
        device = torch.device("cpu" if cfg.device == "auto" else cfg.device)
        self.cfg = cfg
        self.model = build_model(cfg.model or task.default_model, task, hidden=cfg.hidden).to(device)
        self.x = [torch.as_tensor(a, device=device) for a in task.train_x[: task.num_train_clients]]
        self.y = [torch.as_tensor(a, device=device) for a in task.train_y[: task.num_train_clients]]
        self.rng = np.random.default_rng(seed)

    def round(self):
        cfg = self.cfg
        clients = self.rng.choice(len(self.x), cfg.sampled_clients, replace=False)
        states = []
        for i in clients:
            local = copy.deepcopy(self.model)
            opt = torch.optim.SGD(local.parameters(), lr=cfg.lr)
            n, B = len(self.x[i]), cfg.batch_size
            epochs = -(-cfg.local_steps * B // n)  # enough shuffled epochs for K minibatches, sliced in order
            order = torch.as_tensor(np.concatenate([self.rng.permutation(n) for _ in range(epochs)]),
                                    device=self.x[i].device)
            for k in range(cfg.local_steps):
                b = order[k * B:(k + 1) * B]
                opt.zero_grad()
                F.cross_entropy(local(self.x[i][b]), self.y[i][b]).backward()
                opt.step()
            states.append(local.state_dict())
        self.model.load_state_dict({n: torch.stack([s[n] for s in states]).mean(0) for n in states[0]})
