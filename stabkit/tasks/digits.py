"""Digits: scikit-learn's bundled 8x8 handwritten digits (1,797 images, no download needed)."""
from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits

from stabkit.partition import partition, split_off
from stabkit.tasks.base import Task
from stabkit.tasks.options import TaskOptions

TEST_SIZE = 297


def build_digits(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Hold out a 297-sample test split, partition the rest among M + H clients, carve val splits.

    Images are scaled to [0, 1] and kept in their natural (1, 8, 8) shape so a CNN can use them.
    Samples left over by the balanced partition are dropped.
    """
    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None, :, :]
    y = data.target.astype(np.int64)
    order = rng.permutation(len(y))
    test, pool = order[:TEST_SIZE], order[TEST_SIZE:]
    parts = partition(y[pool], opts.partition, opts.clients + opts.heldout_clients, rng,
                      alpha=opts.dirichlet_alpha, shards_per_client=opts.shards_per_client)
    splits = [split_off(pool[p], opts.val_fraction, rng) for p in parts]
    return Task(
        name="digits", kind="classification", num_classes=10, input_shape=(1, 8, 8),
        train_x=[x[tr] for tr, _ in splits], train_y=[y[tr] for tr, _ in splits],
        val_x=[x[va] for _, va in splits], val_y=[y[va] for _, va in splits],
        test_x=x[test], test_y=y[test], num_train_clients=opts.clients, default_model="mlp",
        description=f"sklearn digits, {opts.partition} partition over "
                    f"{opts.clients}+{opts.heldout_clients} clients",
    )
