"""Task: a federated data set (per-client arrays), a test split, held-out clients and a model.

A task is built once from plain numpy arrays and is shared by both trajectories of every pair; the
engine (``stabkit.engine.data``) turns it into padded tensors. Client lists hold the ``num_train_clients``
training clients first, then the held-out clients (never in the training population: they supply the
replacement clients of client perturbation and the unparticipating-client risk R_u).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Task:
    """Federated data, already partitioned.

    ``train_x[i]`` / ``train_y[i]``: client i's training samples (``[n_i, *input_shape]``, labels
    ``[n_i]`` int64 for classification, float for regression). ``val_x[i]`` / ``val_y[i]``: held-out
    samples from client i's own distribution (semi-empirical risk R_e, and the pool a replaced sample is
    drawn from). ``test_x`` / ``test_y``: the standard test split. ``constants``: closed-form problem
    constants where the task knows them (quadratic: L, mu, sigma_g2, x_star).
    """

    name: str
    kind: str  # "classification" or "regression"
    num_classes: int  # 0 for regression
    input_shape: tuple
    train_x: list
    train_y: list
    val_x: list
    val_y: list
    test_x: np.ndarray
    test_y: np.ndarray
    num_train_clients: int
    default_model: str
    constants: dict = field(default_factory=dict)
    description: str = ""

    @property
    def num_clients(self) -> int:
        """Training clients plus held-out clients."""
        return len(self.train_x)

    @property
    def num_heldout_clients(self) -> int:
        return self.num_clients - self.num_train_clients
