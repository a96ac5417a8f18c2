"""Write small data sets in the papers' published file formats (for tests, benchmarks and smoke runs).

Each writer produces the exact on-disk layout the loaders in ``stabkit.tasks`` read (pickle batches, idx
files, LEAF json, the Tiny ImageNet folder), filled with arrays from ``np.random.default_rng(seed)``, and
returns the arrays it wrote so a test can compare them with what a loader reads back.
"""
from __future__ import annotations

import json
import pickle
import struct
from pathlib import Path
from typing import Optional

import numpy as np
from PIL import Image

from stabkit.tasks.cifar import VARIANTS as CIFAR
from stabkit.tasks.idx import VARIANTS as IDX
from stabkit.tasks.leaf import ALPHABET

_IDX_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D}


def write_cifar(root: Path, task: str, train: int, test: int, seed: int = 0) -> dict:
    """CIFAR-10/100 batches with ``train`` samples (split over the train batches) and ``test`` samples."""
    v, rng = CIFAR[task], np.random.default_rng(seed)
    folder = Path(root) / v["folder"]
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for split, names, n in (("train", v["train"], train), ("test", v["test"], test)):
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = rng.integers(0, v["classes"], n)
        for name, rows in zip(names, np.array_split(np.arange(n), len(names))):
            batch = {b"batch_label": name.encode(), b"data": data[rows],
                     v["label"].encode(): labels[rows].tolist(), b"filenames": [b"x.png"] * len(rows)}
            (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
        out[split] = (data.reshape(-1, 3, 32, 32), labels)
    return out


def write_idx_file(path: Path, array: np.ndarray) -> None:
    """One idx file: magic (0, 0, dtype code, ndim), big-endian dimension sizes, big-endian data."""
    header = bytes([0, 0, _IDX_CODES[array.dtype], array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    Path(path).write_bytes(header + array.astype(array.dtype.newbyteorder(">")).tobytes())


def write_idx(root: Path, task: str, train: int, test: int, seed: int = 0, labels: int = 10,
              size: int = 28) -> dict:
    """The four idx files of ``task`` (mnist, fashion_mnist, emnist_l) with labels in [1, labels] for
    EMNIST (letters start at 1) and [0, labels) otherwise."""
    rng, files, low = np.random.default_rng(seed), IDX[task]["files"], 1 if task == "emnist_l" else 0
    Path(root).mkdir(parents=True, exist_ok=True)
    out = {}
    for split, (images, lab), n in (("train", files[:2], train), ("test", files[2:], test)):
        x = rng.integers(0, 256, (n, size, size), dtype=np.uint8)
        y = rng.integers(low, low + labels, n).astype(np.uint8)
        write_idx_file(Path(root) / images, x)
        write_idx_file(Path(root) / lab, y)
        out[split] = (x, y)
    return out


def write_leaf(root: Path, users: int, samples: tuple, seed: int = 0, length: int = 80) -> dict:
    """LEAF Shakespeare json (one file per split) for ``users`` roles with ``samples = (train, test)`` each."""
    rng, out = np.random.default_rng(seed), {}
    for split, n in zip(("train", "test"), samples):
        folder = Path(root) / split
        folder.mkdir(parents=True, exist_ok=True)
        names = [f"ROLE_{u}" for u in range(users)]
        data = {u: rng.integers(0, len(ALPHABET), (n, length + 1)) for u in names}
        doc = {"users": names, "num_samples": [n] * users, "hierarchies": [],
               "user_data": {u: {"x": ["".join(ALPHABET[i] for i in row[:-1]) for row in a],
                                 "y": [ALPHABET[row[-1]] for row in a]} for u, a in data.items()}}
        (folder / f"all_data_{split}.json").write_text(json.dumps(doc))
        out[split] = {u: (a[:, :-1], a[:, -1]) for u, a in data.items()}
    return out


def write_tinyimagenet(root: Path, classes: int, per_class: int, val: int, seed: int = 0, size: int = 64,
                       decoded: bool = True) -> Optional[dict]:
    """A ``tiny-imagenet-200`` folder with ``classes`` wnids, ``per_class`` training JPEGs each and ``val``
    val JPEGs; returns the pixel arrays as Pillow decodes them back (JPEG is lossy), or None without
    ``decoded`` (data of the real size for a time estimate: 110,000 images)."""
    rng, base = np.random.default_rng(seed), Path(root) / "tiny-imagenet-200"
    wnids = [f"n{idx:08d}" for idx in range(classes)]
    (base / "val" / "images").mkdir(parents=True, exist_ok=True)
    (base / "wnids.txt").write_text("\n".join(wnids) + "\n")

    def save(path: Path) -> Optional[np.ndarray]:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path, "JPEG", quality=95)
        if not decoded:
            return None
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB")).transpose(2, 0, 1)

    x = [save(base / "train" / w / "images" / f"{w}_{i}.JPEG") for w in wnids for i in range(per_class)]
    y = np.repeat(np.arange(classes), per_class)
    ty = rng.integers(0, classes, val)
    tx = [save(base / "val" / "images" / f"val_{i}.JPEG") for i in range(val)]
    (base / "val" / "val_annotations.txt").write_text(
        "".join(f"val_{i}.JPEG\t{wnids[c]}\t0\t0\t{size - 1}\t{size - 1}\n" for i, c in enumerate(ty)))
    return {"train": (np.stack(x), y), "test": (np.stack(tx), ty)} if decoded else None
