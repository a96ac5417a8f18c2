"""npz: the user's own federated data set.

Format: one ``.npz`` file (``np.savez``) with

* ``x`` [N, ...]: features, any per-sample shape (kept as the task's ``input_shape``);
* ``y`` [N]: integer labels (classification, ``num_classes = max label + 1``) or floats (regression);
* ``client`` [N]: integer client id of each sample;
* optional ``x_test`` [T, ...] and ``y_test`` [T]: a test split (both or neither).

Clients are the distinct ids in sorted order. The last ``heldout_clients`` ids are the held-out
clients and the first ``clients`` of the remaining ids the training population (further ids are
unused). Each client moves ``val_fraction`` of its samples to its val split; without ``x_test``,
every training client also moves ``val_fraction`` of its samples to the test split.
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError, require
from stabkit.tasks.base import Task
from stabkit.tasks.partition import split_off

EXPECTED = "expected arrays x [N,...], y [N], client [N], optional x_test, y_test"


# Integer labels are class indices: a label range this much wider than the labels used (one stray label of
# 10^6) would build a huge output layer whose memory the run estimate cannot fully foresee; refused up front.
SPARSE_CLASSES = 1000  # label ranges up to this many classes are always accepted
SPARSE_RATIO = 100  # beyond it, at least 1 in SPARSE_RATIO classes must occur in y or y_test


def _fail(path: str, problem: str) -> ConfigError:
    """The one-line error for a malformed file: the file, the problem, the expected format."""
    return ConfigError(f"npz file {path} {problem}: {EXPECTED}")


def _load(path: str) -> dict:
    """Read the arrays and check names, dtypes, dimensions and lengths."""
    if not os.path.isfile(path):
        raise _fail(path, "does not exist")
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise _fail(path, f"cannot be read ({type(exc).__name__})") from None
    for name in ("x", "y", "client"):
        if name not in arrays:
            raise _fail(path, f"lacks array '{name}'")
    if ("x_test" in arrays) != ("y_test" in arrays):
        raise _fail(path, "has only one of 'x_test', 'y_test'")
    x, y, client = arrays["x"], arrays["y"], arrays["client"]
    if x.ndim < 2 or y.ndim != 1 or client.ndim != 1:
        raise _fail(path, f"has x.ndim={x.ndim}, y.ndim={y.ndim}, client.ndim={client.ndim} "
                          "(need >=2, 1, 1)")
    if not len(x) == len(y) == len(client):
        raise _fail(path, f"has mismatched lengths x {len(x)}, y {len(y)}, client {len(client)}")
    if not np.issubdtype(client.dtype, np.integer):
        raise _fail(path, f"has non-integer client ids (dtype {client.dtype})")
    if not (np.issubdtype(y.dtype, np.integer) or np.issubdtype(y.dtype, np.floating)):
        raise _fail(path, f"has y of dtype {y.dtype} (need integer or float)")
    if np.issubdtype(y.dtype, np.integer) and y.size and y.min() < 0:
        raise _fail(path, "has negative labels")
    if "x_test" in arrays:
        xt, yt = arrays["x_test"], arrays["y_test"]
        if xt.shape[1:] != x.shape[1:] or yt.ndim != 1 or len(xt) != len(yt):
            raise _fail(path, f"has x_test {xt.shape}, y_test {yt.shape} not matching x {x.shape}")
        if yt.dtype.kind != y.dtype.kind:
            raise _fail(path, f"has y_test of dtype {yt.dtype} but y of dtype {y.dtype}")
        if np.issubdtype(y.dtype, np.integer) and yt.size and (yt.min() < 0 or yt.max() > y.max(initial=0)):
            outside = int(((yt < 0) | (yt > y.max(initial=0))).sum())
            raise _fail(path, f"has {outside} y_test labels outside the training labels 0..{y.max(initial=0)}")
    for name in ("x", "x_test", "y", "y_test"):
        _check_values(path, name, arrays.get(name))
    return arrays


def _check_values(path: str, name: str, a) -> None:
    """Numbers only, and all finite as the float32 the task stores (a NaN or inf would only surface as a
    run diverging at round 1)."""
    if a is None:
        return
    if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating) or a.dtype == bool):
        raise _fail(path, f"has {name} of dtype {a.dtype} (need numbers)")
    if np.issubdtype(a.dtype, np.floating):
        with np.errstate(over="ignore"):
            bad = int(a.size - np.count_nonzero(np.isfinite(a.astype(np.float32))))
        if bad:
            raise _fail(path, f"has {bad} non-finite values in {name} (NaN, inf, or beyond float32's range)")


def build_npz(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Load ``opts.npz_path`` and split it into training, held-out, val and test data as documented."""
    path = opts.npz_path
    require(path is not None, "npz_path", path, "a path to an .npz file (needed by the npz task)")
    arrays = _load(path)
    x, y, client = arrays["x"], arrays["y"], arrays["client"]
    ids = np.unique(client)
    wanted = opts.clients + opts.heldout_clients
    require(len(ids) >= wanted, "clients", opts.clients,
            f"clients + heldout_clients = {wanted} but npz file {path} has {len(ids)} distinct client ids")
    chosen = np.concatenate([ids[:opts.clients], ids[len(ids) - opts.heldout_clients:]])
    own_test = "x_test" not in arrays
    splits = [split_off(np.flatnonzero(client == c), opts.val_fraction, rng,
                        parts=2 if own_test and k < opts.clients else 1)
              for k, c in enumerate(chosen)]
    if own_test:
        test_idx = np.concatenate([s[2] for s in splits[:opts.clients]])
        test_x, test_y = x[test_idx], y[test_idx]
    else:
        test_x, test_y = arrays["x_test"], arrays["y_test"]
    classification = np.issubdtype(y.dtype, np.integer)
    if classification:
        y, test_y = y.astype(np.int64), test_y.astype(np.int64)
    else:
        y, test_y = y.astype(np.float32), test_y.astype(np.float32)
    x, test_x = x.astype(np.float32), test_x.astype(np.float32)
    num_classes = int(max(y.max(), test_y.max(initial=0))) + 1 if classification else 0
    used = len(np.union1d(y, test_y)) if classification else 0
    if num_classes > SPARSE_CLASSES and used < num_classes / SPARSE_RATIO:
        raise _fail(path, f"has labels up to {num_classes - 1} (a {num_classes:,}-class output layer) but only "
                          f"{used} distinct labels; integer labels are class indices 0..C-1: renumber them "
                          f"(np.unique(y, return_inverse=True))")
    return Task(
        name="npz", kind="classification" if classification else "regression",
        num_classes=num_classes, input_shape=tuple(x.shape[1:]),
        train_x=[x[s[0]] for s in splits], train_y=[y[s[0]] for s in splits],
        val_x=[x[s[1]] for s in splits], val_y=[y[s[1]] for s in splits],
        test_x=test_x, test_y=test_y, num_train_clients=opts.clients,
        default_model="mlp" if classification else "linear",
        description=f"npz file {path}, {opts.clients}+{opts.heldout_clients} of {len(ids)} clients",
    )
