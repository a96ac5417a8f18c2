"""FedProx Synthetic(alpha, beta) (Li et al., 2020): per-client softmax-regression data."""
from __future__ import annotations

import math

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks.base import Task


def _client_data(opts: TaskOptions, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw one client's model and input distribution, then ``n`` labelled samples from them.

    alpha controls how much client models differ (u_k ~ N(0, alpha)), beta how much client input
    distributions differ (B_k ~ N(0, beta)); both are variances, as in FedProx.
    """
    u = rng.normal(0.0, math.sqrt(opts.synthetic_alpha))
    b_mean = rng.normal(0.0, math.sqrt(opts.synthetic_beta))
    w = rng.normal(u, 1.0, size=(opts.classes, opts.dim))
    bias = rng.normal(u, 1.0, size=opts.classes)
    v = rng.normal(b_mean, 1.0, size=opts.dim)
    std = np.arange(1, opts.dim + 1, dtype=float) ** -0.6  # Sigma_jj = j^-1.2
    x = v + std * rng.standard_normal((n, opts.dim))
    y = np.argmax(x @ w.T + bias, axis=1)
    return x.astype(np.float32), y.astype(np.int64)


def data_bytes(opts: TaskOptions) -> int:
    """Bytes of the float32 features ``build_synthetic`` generates plus one client's float64 model (checked
    before generating them)."""
    n, n_val = opts.samples_per_client, math.ceil(opts.val_fraction * opts.samples_per_client)
    samples = (opts.clients + opts.heldout_clients) * (n + n_val) + opts.clients * n_val
    return samples * opts.dim * 4 + opts.classes * (opts.dim + 1) * 8


def build_synthetic(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Natural partition: each client is its own distribution (the ``partition`` option is ignored).

    Every client has ``samples_per_client`` training samples and ``ceil(val_fraction *
    samples_per_client)`` val samples; training clients also draw as many test samples, whose union
    is the test split (so the test split follows the training population's mixture).
    """
    n = opts.samples_per_client
    n_val = math.ceil(opts.val_fraction * n)
    data = [_client_data(opts, rng, n + n_val + (n_val if k < opts.clients else 0))
            for k in range(opts.clients + opts.heldout_clients)]
    return Task(
        name="synthetic", kind="classification", num_classes=opts.classes,
        input_shape=(opts.dim,),
        train_x=[x[:n] for x, _ in data], train_y=[y[:n] for _, y in data],
        val_x=[x[n:n + n_val] for x, _ in data], val_y=[y[n:n + n_val] for _, y in data],
        test_x=np.concatenate([x[n + n_val:] for x, _ in data]),
        test_y=np.concatenate([y[n + n_val:] for _, y in data]),
        num_train_clients=opts.clients, default_model="logistic",
        description=f"FedProx Synthetic({opts.synthetic_alpha}, {opts.synthetic_beta}), "
                    f"{opts.clients}+{opts.heldout_clients} clients",
    )
