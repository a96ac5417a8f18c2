"""Partition schemes: disjoint, balanced, reproducible, and label skew that follows alpha."""

import numpy as np
import pytest

from stabkit.errors import ConfigError
from stabkit.tasks.partition import partition, split_off

LABELS = np.random.default_rng(123).integers(0, 10, 5000)


def _class_shares(parts):
    """Per-client label histograms, normalised, sorted descending."""
    hist = np.stack([np.bincount(LABELS[p], minlength=10) for p in parts]).astype(float)
    return -np.sort(-hist / hist.sum(axis=1, keepdims=True), axis=1)


@pytest.mark.parametrize("scheme", ["iid", "dirichlet", "shards"])
def test_disjoint_balanced_reproducible(scheme):
    parts = partition(LABELS, scheme, 30, np.random.default_rng(0), alpha=0.5, shards_per_client=2)
    flat = np.concatenate(parts)
    assert len(parts) == 30
    assert len(np.unique(flat)) == len(flat)
    assert flat.min() >= 0 and flat.max() < len(LABELS)
    assert len({len(p) for p in parts}) == 1
    assert len(parts[0]) == (5000 // 30 if scheme != "shards" else 2 * (5000 // 60))
    again = partition(LABELS, scheme, 30, np.random.default_rng(0), alpha=0.5, shards_per_client=2)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


def test_dirichlet_large_alpha_is_near_uniform():
    shares = _class_shares(partition(LABELS, "dirichlet", 10, np.random.default_rng(1), alpha=1e4))
    assert shares[:, 0].max() < 0.3


def test_dirichlet_small_alpha_is_skewed():
    shares = _class_shares(partition(LABELS, "dirichlet", 20, np.random.default_rng(1), alpha=0.1))
    assert np.median(shares[:, :2].sum(axis=1)) > 0.7


def test_shards_give_few_classes():
    shares = _class_shares(partition(LABELS, "shards", 50, np.random.default_rng(2), shards_per_client=2))
    num_classes = (shares > 0).sum(axis=1)
    assert num_classes.max() <= 4  # a shard may straddle one class boundary
    assert np.median(num_classes) <= 2


def test_dirichlet_on_50k_labels_assigns_every_sample_once():
    labels = np.random.default_rng(0).integers(0, 10, 50_000)
    parts = partition(labels, "dirichlet", 100, np.random.default_rng(0), alpha=0.1)
    assert sorted(np.concatenate(parts).tolist()) == list(range(50_000))


@pytest.mark.parametrize("kwargs, field", [
    (dict(scheme="nope", num_clients=5), "partition"),
    (dict(scheme="iid", num_clients=0), "clients"),
    (dict(scheme="iid", num_clients=5001), "clients"),
    (dict(scheme="dirichlet", num_clients=5, alpha=0.0), "dirichlet_alpha"),
    (dict(scheme="shards", num_clients=5, shards_per_client=0), "shards_per_client"),
])
def test_bad_arguments(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        partition(LABELS, rng=np.random.default_rng(0), **kwargs)


def test_split_off():
    rest, val, test = split_off(np.arange(10, 20), 0.2, np.random.default_rng(0), parts=2)
    assert (len(rest), len(val), len(test)) == (6, 2, 2)
    assert sorted(np.concatenate([rest, val, test])) == list(range(10, 20))
    with pytest.raises(ConfigError, match="val_fraction"):
        split_off(np.arange(1), 0.2, np.random.default_rng(0))
