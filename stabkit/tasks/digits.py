"""Digits: scikit-learn's bundled 8x8 handwritten digits (1,797 images, no download needed)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks.base import Task
from stabkit.tasks.pooled import partitioned_task

TEST_SIZE = 297


def build_digits(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Hold out a 297-sample test split, partition the rest among M + H clients, carve val splits.

    Images are scaled to [0, 1] and kept in their natural (1, 8, 8) shape so a CNN can use them.
    Samples left over by the balanced partition are dropped.
    """
    images, target = _digits_arrays()
    x = (images / 16.0).astype(np.float32)[:, None, :, :]
    y = target.astype(np.int64)
    order = rng.permutation(len(y))
    test, pool = order[:TEST_SIZE], order[TEST_SIZE:]
    return partitioned_task("digits", x, y, pool, (x[test], y[test]), opts, rng, num_classes=10,
                            default_model="mlp", source="sklearn digits")


def _digits_arrays() -> tuple:
    """scikit-learn's bundled digits (``load_digits``'s images ``[1797, 8, 8]`` and targets), read from the
    package's data file without importing scikit-learn: its import pulls in scipy (1.6 s of a run's start-up)."""
    spec = importlib.util.find_spec("sklearn")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    table = np.loadtxt(path, delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)
