"""CIFAR-10 and CIFAR-100 from their "python version" pickle batches.

Files (as unpacked from ``cifar-10-python.tar.gz`` / ``cifar-100-python.tar.gz``), under ``--data-dir``
or its ``cifar-10-batches-py`` / ``cifar-100-python`` folder: CIFAR-10 ``data_batch_1`` ..
``data_batch_5`` and ``test_batch``; CIFAR-100 ``train`` and ``test``. Each is a pickled dict with
``b"data"`` (uint8 ``[N, 3072]``, channel-major 32x32 RGB) and ``b"labels"`` (CIFAR-10) or
``b"fine_labels"`` (CIFAR-100). Pixels are scaled to [0, 1] and standardised per channel with the mean and
std of the FedSAGD / FedDyn reference code; no augmentation.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks.base import Task
from stabkit.tasks.files import data_dir, locate, malformed
from stabkit.tasks.pooled import partitioned_task, standardise

FORMAT = "a CIFAR python-version pickle batch (dict with b'data' uint8 [N, 3072] and b'{label}' [N])"
VARIANTS = {
    "cifar10": dict(folder="cifar-10-batches-py", train=tuple(f"data_batch_{i}" for i in range(1, 6)),
                    test=("test_batch",), label="labels", classes=10,
                    mean=(0.491, 0.482, 0.447), std=(0.247, 0.243, 0.262)),
    "cifar100": dict(folder="cifar-100-python", train=("train",), test=("test",), label="fine_labels",
                     classes=100, mean=(0.5071, 0.4867, 0.4408), std=(0.2675, 0.2565, 0.2761)),
}


def read_batch(path: Path, label: str, task: str = "cifar") -> tuple[np.ndarray, np.ndarray]:
    """One pickle batch: images uint8 ``[N, 3, 32, 32]`` and labels int64 ``[N]``, exactly as stored."""
    fmt = FORMAT.format(label=label)
    try:
        with open(path, "rb") as f:
            batch = pickle.load(f, encoding="bytes")
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, ImportError) as exc:
        raise malformed(task, path, fmt, f"cannot be unpickled ({type(exc).__name__})") from None
    if not isinstance(batch, dict) or b"data" not in batch or label.encode() not in batch:
        raise malformed(task, path, fmt, f"lacks b'data' or b'{label}'")
    data, labels = np.asarray(batch[b"data"]), np.asarray(batch[label.encode()])
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or labels.shape != (len(data),):
        raise malformed(task, path, fmt, f"has data {data.dtype} {data.shape} and labels {labels.shape}")
    return data.reshape(-1, 3, 32, 32), labels.astype(np.int64)


def read_split(root: Path, task: str, names: tuple) -> tuple[np.ndarray, np.ndarray]:
    """The concatenated batches ``names`` of ``task`` (one of :data:`VARIANTS`)."""
    v = VARIANTS[task]
    fmt = FORMAT.format(label=v["label"])
    parts = [read_batch(locate(root, (v["folder"], ""), (n,), task, fmt), v["label"], task) for n in names]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _builder(task: str):
    v = VARIANTS[task]

    def build(opts: TaskOptions, rng: np.random.Generator) -> Task:
        root = data_dir(opts, task)
        x, y = read_split(root, task, v["train"])
        tx, ty = read_split(root, task, v["test"])
        x, tx = (standardise(a, v["mean"], v["std"], divide=255) for a in (x, tx))
        return partitioned_task(task, x, y, np.arange(len(y)), (tx, ty), opts, rng, num_classes=v["classes"],
                                default_model="fedavg_cnn", source=f"{task.upper()} from {root}")

    build.__doc__ = f"{task.upper()} from ``opts.data_dir``, partitioned by ``opts.partition``."
    return build


build_cifar10, build_cifar100 = _builder("cifar10"), _builder("cifar100")
