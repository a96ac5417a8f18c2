"""From pooled arrays to a partitioned :class:`Task`: the shared last step of every pooled data set.

Data sets that arrive as one labelled training pool plus a test split (digits, CIFAR, the idx data sets,
Tiny ImageNet) are split the same way: ``opts.partition`` (iid, Dirichlet label skew, shards) deals the
pool among M + H clients of equal size, then each client gives ``val_fraction`` of its samples to its
validation split. All randomness comes from ``rng``, so equal options give identical tasks.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError
from stabkit.tasks.base import Task
from stabkit.tasks.partition import partition, split_off


def partitioned_task(name: str, x: np.ndarray, y: np.ndarray, pool: np.ndarray, test: tuple,
                     opts: TaskOptions, rng: np.random.Generator, *,
                     num_classes: int, default_model: str, source: str) -> Task:
    """Partition samples ``x[pool]`` among ``opts.clients + opts.heldout_clients`` clients; ``test``: the test
    split ``(x, y)``.

    ``source`` names the data in the task description. Samples left over by the balanced partition
    are dropped. Labels outside ``0..num_classes-1`` (a malformed file) are refused in one line.
    """
    test_x, test_y = test
    outside = [int(((a < 0) | (a >= num_classes)).sum()) for a in (y[pool], test_y)]
    if any(outside):
        raise ConfigError(f"{name}: {source} has labels outside 0..{num_classes - 1} ({outside[0]} training, "
                          f"{outside[1]} test samples); the files are malformed")
    parts = partition(y[pool], opts.partition, opts.clients + opts.heldout_clients, rng,
                      alpha=opts.dirichlet_alpha, shards_per_client=opts.shards_per_client)
    splits = [split_off(pool[p], opts.val_fraction, rng) for p in parts]
    return Task(
        name=name, kind="classification", num_classes=num_classes, input_shape=tuple(x.shape[1:]),
        train_x=[x[tr] for tr, _ in splits], train_y=[y[tr] for tr, _ in splits],
        val_x=[x[va] for _, va in splits], val_y=[y[va] for _, va in splits],
        test_x=test_x, test_y=test_y, num_train_clients=opts.clients, default_model=default_model,
        description=f"{source}, {opts.partition} partition over {opts.clients}+{opts.heldout_clients} clients",
    )


def standardise(x: np.ndarray, mean, std, divide: Optional[float] = None) -> np.ndarray:
    """``(x / divide - mean) / std`` per channel (axis 1) in float32 (``x / divide`` skipped without
    ``divide``); ``mean``/``std`` scalars or per channel. One float32 copy of ``x``, worked on in place: the
    expression's temporaries held three copies at once (Tiny ImageNet: 4.9 GB each)."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = x.astype(np.float32)
    if divide is not None:
        out /= np.float32(divide)
    out -= np.asarray(mean, dtype=np.float32).reshape(shape)
    out /= np.asarray(std, dtype=np.float32).reshape(shape)
    return out
