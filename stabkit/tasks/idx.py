"""MNIST, Fashion-MNIST and EMNIST-L from their idx files (LeCun's format, optionally gzipped).

Files under ``--data-dir`` (names as published, ``.gz`` or unpacked): MNIST and Fashion-MNIST
``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``,
``t10k-labels-idx1-ubyte``; EMNIST (the "gzip" archive's ``emnist-letters-*`` files)
``emnist-letters-train-images-idx3-ubyte`` etc. EMNIST-L is the papers' subset: the first 10 letters
(a-j, labels 1..10 of EMNIST-letters, mapped to 0..9; the FedSAGD paper's EMNIST-L). Images become ``[N, 1, 28, 28]``
scaled to [0, 1] and standardised by the training set's global mean and std (the FedDyn / FedSAGD
reference code); EMNIST images are kept as stored (transposed, as in torchvision).
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks.base import Task
from stabkit.tasks.files import data_dir, locate, malformed
from stabkit.tasks.pooled import partitioned_task, standardise

FORMAT = "an idx file (big-endian magic 0x0000TTDD, DD dimension sizes, then the data)"
_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
VARIANTS = {
    "mnist": dict(files=_MNIST_FILES, folders=("", "mnist", "MNIST/raw"), classes=10),
    "fashion_mnist": dict(files=_MNIST_FILES, folders=("", "fashion_mnist", "FashionMNIST/raw"), classes=10),
    "emnist_l": dict(files=tuple(f"emnist-letters-{f}" for f in _MNIST_FILES), folders=("", "gzip", "EMNIST/raw"),
                     classes=10, labels=range(1, 11)),
}


def read_idx(path: Path, task: str = "idx") -> np.ndarray:
    """The array stored in an idx file (gzipped if its name ends in ``.gz``), in its stored dtype."""
    try:
        raw = (gzip.open if path.suffix == ".gz" else open)(path, "rb").read()
    except (OSError, EOFError) as exc:
        raise malformed(task, path, FORMAT, f"cannot be read ({type(exc).__name__})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _DTYPES:
        raise malformed(task, path, FORMAT, "has no valid idx magic number")
    dtype, ndim = np.dtype(_DTYPES[raw[2]]), raw[3]
    shape = tuple(np.frombuffer(raw, ">u4", count=ndim, offset=4).tolist()) if len(raw) >= 4 + 4 * ndim else None
    if shape is None or len(raw) != 4 + 4 * ndim + int(np.prod(shape)) * dtype.itemsize:
        raise malformed(task, path, FORMAT, f"has {len(raw)} bytes, not what its header {shape} declares")
    return np.frombuffer(raw, dtype, offset=4 + 4 * ndim).reshape(shape).astype(dtype.newbyteorder("="))


def _read(root: Path, task: str, name: str, ndim: int) -> np.ndarray:
    v = VARIANTS[task]
    path = locate(root, v["folders"], (name, name + ".gz"), task, FORMAT)
    a = read_idx(path, task)
    if a.ndim != ndim or a.dtype != np.uint8:  # the published files: magic 0x00000801 / 0x00000803
        raise malformed(task, path, FORMAT, f"holds a {a.ndim}-d array of {a.dtype} (need {ndim}-d unsigned "
                                            f"bytes, magic number 0x000008{ndim:02X})")
    return a


def read_split(root: Path, task: str, train: bool) -> tuple[np.ndarray, np.ndarray]:
    """Images ``[N, 28, 28]`` and labels ``[N]`` of the train or test split, exactly as stored."""
    names = VARIANTS[task]["files"][:2] if train else VARIANTS[task]["files"][2:]
    x, y = _read(root, task, names[0], 3), _read(root, task, names[1], 1)
    if len(x) != len(y):
        raise malformed(task, root / names[1], FORMAT, f"has {len(y)} labels for {len(x)} images")
    return x, y


def _builder(task: str):
    v = VARIANTS[task]

    def build(opts: TaskOptions, rng: np.random.Generator) -> Task:
        root = data_dir(opts, task)
        (x, y), (tx, ty) = read_split(root, task, True), read_split(root, task, False)
        if "labels" in v:  # keep the chosen classes, relabelled 0..C-1
            keep = list(v["labels"])
            (x, y), (tx, ty) = ((a[np.isin(b, keep)], b[np.isin(b, keep)] - keep[0]) for a, b in ((x, y), (tx, ty)))
        x, tx = (a[:, None].astype(np.float32) / np.float32(255) for a in (x, tx))
        mean, std = float(x.mean()), float(x.std())
        x, tx = standardise(x, mean, std), standardise(tx, mean, std)
        return partitioned_task(task, x, y.astype(np.int64), np.arange(len(y)), (tx, ty.astype(np.int64)), opts,
                                rng, num_classes=v["classes"], default_model="logistic",
                                source=f"{task} from {root}")

    build.__doc__ = f"{task} from ``opts.data_dir``, partitioned by ``opts.partition``."
    return build


build_mnist, build_fashion_mnist, build_emnist_l = (_builder(t) for t in ("mnist", "fashion_mnist", "emnist_l"))
