"""Task registry: build a :class:`~stabkit.tasks.base.Task` by name from :class:`TaskOptions`.

All randomness comes from ``np.random.default_rng(opts.seed)``, so equal options give identical arrays.
Plug-in tasks (``stabkit.plugins``): a builder ``build(opts: TaskOptions) -> Task`` named by an import
path ``package.module:build`` or an entry point of the group ``stabkit.tasks``; the task it returns is
checked by :func:`~stabkit.tasks.base.check_task`.
"""
from __future__ import annotations

import numpy as np

from stabkit import plugins
from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks import quadratic, synthetic
from stabkit.tasks.base import Task, check_task
from stabkit.tasks.cifar import build_cifar10, build_cifar100
from stabkit.tasks.digits import build_digits
from stabkit.tasks.idx import build_emnist_l, build_fashion_mnist, build_mnist
from stabkit.tasks.leaf import build_shakespeare
from stabkit.tasks.npz import build_npz
from stabkit.tasks.quadratic import build_quadratic
from stabkit.tasks.synthetic import build_synthetic
from stabkit.tasks.tinyimagenet import build_tinyimagenet

_BUILDERS = {"digits": build_digits, "synthetic": build_synthetic,
             "quadratic": build_quadratic, "npz": build_npz,
             "cifar10": build_cifar10, "cifar100": build_cifar100, "mnist": build_mnist,
             "fashion_mnist": build_fashion_mnist, "emnist_l": build_emnist_l,
             "shakespeare": build_shakespeare, "tinyimagenet": build_tinyimagenet}
TASKS = tuple(_BUILDERS)
_GENERATED_BYTES = {"synthetic": synthetic.data_bytes, "quadratic": quadratic.data_bytes}

__all__ = ["TASKS", "Task", "TaskOptions", "build_task", "check_task", "generated_bytes"]


def build_task(name: str, opts: TaskOptions) -> Task:
    """Build task ``name`` (one of :data:`TASKS`, an installed plug-in or an import path) with options ``opts``."""
    if name in _BUILDERS:
        return _BUILDERS[name](opts, np.random.default_rng(opts.seed))
    builder = plugins.resolve("task", name, TASKS, "package.module:build")
    task = plugins.call("task", name, builder, opts)
    check_task(task, name)
    return task


def generated_bytes(name: str, opts: TaskOptions) -> int:
    """Bytes of the arrays task ``name`` generates from ``opts`` (0 for tasks read from files or plug-ins, whose
    size is the data's), so that a run can be refused before generating more than fits in memory."""
    size = _GENERATED_BYTES.get(name)
    return size(opts) if size else 0
