"""The baseline: FedAvg as typical research code writes it — one Python loop over clients.

Per round: for each sampled client, ``copy.deepcopy`` the global ``nn.Module``, train it K steps with
``torch.optim.SGD`` on index-sliced minibatches, and average the clients' state dicts. One trajectory,
no pairing. It runs on the same task, model and hyperparameters as the stabkit run it is compared with,
on the same device, in the same process and under the same thread setting (``stabkit.engine.threads``), so the
ratio measures the batching and not a thread-count difference.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from stabkit.config.runconfig import RunConfig
from stabkit.models.registry import build_model
from stabkit.tasks.base import Task
from stabkit.engine.threads import threads_for


class PerClientLoop:
    """Plain FedAvg over ``task``'s training clients with ``cfg``'s s, K, B and lr."""

    def __init__(self, cfg: RunConfig, task: Task, flops_per_sample: float, seed: int = 0):
        torch.manual_seed(seed)
        device = torch.device("cpu" if cfg.device == "auto" else cfg.device)
        self.cfg = cfg
        self.model = build_model(cfg.model or task.default_model, task, hidden=cfg.hidden).to(device)
        self.x = [torch.as_tensor(a, device=device) for a in task.train_x[: task.num_train_clients]]
        self.y = [torch.as_tensor(a, device=device) for a in task.train_y[: task.num_train_clients]]
        self.rng = np.random.default_rng(seed)
        self.flops = flops_per_sample * cfg.batch_size

    def round(self):
        cfg = self.cfg
        with threads_for(self.flops):
            clients = self.rng.choice(len(self.x), cfg.sampled_clients, replace=False)
            states = []
            for i in clients:
                local = copy.deepcopy(self.model)
                opt = torch.optim.SGD(local.parameters(), lr=cfg.lr)
                perm = torch.as_tensor(self.rng.permutation(len(self.x[i])), device=self.x[i].device)
                for k in range(cfg.local_steps):
                    b = perm[(torch.arange(cfg.batch_size) + k * cfg.batch_size) % len(perm)]
                    opt.zero_grad()
                    F.cross_entropy(local(self.x[i][b]), self.y[i][b]).backward()
                    opt.step()
                states.append(local.state_dict())
            self.model.load_state_dict({n: torch.stack([s[n] for s in states]).mean(0) for n in states[0]})
