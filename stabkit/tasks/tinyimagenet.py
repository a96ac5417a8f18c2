"""Tiny ImageNet from its published folder layout (``tiny-imagenet-200.zip`` unpacked), images via Pillow.

Layout under ``--data-dir`` or its ``tiny-imagenet-200`` folder: ``wnids.txt`` (one class id per line; the
line order is the label), ``train/<wnid>/images/*.JPEG`` and ``val/images/*.JPEG`` with
``val/val_annotations.txt`` (tab-separated: file name, wnid, box). The official val split (the test labels
are not published) is the test split. Images become RGB ``[3, H, W]`` (64x64 in the real data) scaled to
[0, 1] and standardised with the ImageNet channel mean and std.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks.base import Task
from stabkit.tasks.files import data_dir, locate, malformed
from stabkit.tasks.pooled import partitioned_task, standardise

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
FOLDERS = ("tiny-imagenet-200", "")
_IMAGE = "an RGB image Pillow can read, of the same size as the others"


def _image(path: Path) -> np.ndarray:
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB")).transpose(2, 0, 1)
    except (OSError, UnidentifiedImageError) as exc:
        raise malformed("tinyimagenet", path, _IMAGE, f"cannot be read ({type(exc).__name__})") from None


def _stack(paths: list, where: Path) -> np.ndarray:
    """The images decoded into one uint8 array (filled in place: a list of 100,000 arrays and their stack held
    the data twice)."""
    if not paths:
        raise malformed("tinyimagenet", where, _IMAGE, "does not exist (no images)")
    first = _image(paths[0])
    out = np.empty((len(paths), *first.shape), dtype=first.dtype)
    out[0] = first
    for i, p in enumerate(paths[1:], 1):
        im = _image(p)
        if im.shape != first.shape:
            raise malformed("tinyimagenet", p, _IMAGE, f"has shape {im.shape}, not {first.shape}")
        out[i] = im
    return out


def read_tinyimagenet(root: Path) -> tuple:
    """Train images uint8 ``[N, 3, H, W]``, labels ``[N]``, val images, val labels (exactly as stored) and
    the number of classes."""
    wnids_path = locate(root, FOLDERS, ("wnids.txt",), "tinyimagenet", "a text file of class ids, one per line")
    base = wnids_path.parent
    wnids = wnids_path.read_text().split()
    label = {w: i for i, w in enumerate(wnids)}
    train = [(p, label[w]) for w in wnids for p in sorted((base / "train" / w / "images").glob("*.JPEG"))]
    annotations = locate(base, ("val",), ("val_annotations.txt",), "tinyimagenet",
                         "a tab-separated file: image name, wnid, box")
    val = []
    for line in annotations.read_text().splitlines():
        fields = line.split("\t")
        if len(fields) < 2 or fields[1] not in label:
            raise malformed("tinyimagenet", annotations, "a tab-separated file: image name, wnid (in wnids.txt), box",
                            f"has the line {line!r}")
        val.append((base / "val" / "images" / fields[0], label[fields[1]]))
    x = _stack([p for p, _ in train], base / "train" / "<wnid>" / "images" / "*.JPEG")
    tx = _stack([p for p, _ in val], base / "val" / "images" / "*.JPEG")
    return (x, np.array([c for _, c in train], np.int64), tx, np.array([c for _, c in val], np.int64),
            len(wnids))


def build_tinyimagenet(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Tiny ImageNet from ``opts.data_dir``, partitioned by ``opts.partition``."""
    root = data_dir(opts, "tinyimagenet")
    x, y, tx, ty, classes = read_tinyimagenet(root)
    x, tx = (standardise(a, MEAN, STD, divide=255) for a in (x, tx))
    return partitioned_task("tinyimagenet", x, y, np.arange(len(y)), (tx, ty), opts, rng, num_classes=classes,
                            default_model="resnet18_gn", source=f"Tiny ImageNet from {root}")
