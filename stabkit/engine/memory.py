"""Memory a run needs, estimated before anything is allocated, and refused when the machine has less.

Without this check ``--clients 1000000``, ``--pairs 100000`` or an npz file with a label of 10^6 (a
million-class output layer) get the process killed by the kernel after minutes. The estimate is a
lower bound made of the allocations that scale with the options (so a refusal is never a false alarm):

* data: the generated task's arrays (:func:`require_generated_memory`, checked before building it and
  without torch: ``stabkit pair`` refuses such a run before importing torch), then the engine's copies of a
  built task (one flat store of the training rows, which evaluation reads too, val and test splits);
* models: ``R x 2`` global models, the algorithm's server state, its per-client state (one row per
  physical client), and about six ``[R, 2, s, d]`` client tensors per local step (models, gradients,
  start points, uploads);
* inputs: one local step's minibatch gathered for all ``R x 2 x s`` clients;
* outputs: that minibatch's logits and their gradient (a million-class output layer is mostly this and
  the models; an npz label range far wider than the labels used is refused before, by the npz loader).

Available memory is the kernel's ``MemAvailable`` once the freed memory glibc keeps for reuse has been given
back (``stabkit.engine.alloc.release``; CPU), or the device's free memory (CUDA).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from stabkit.engine import alloc
from stabkit.errors import ConfigError
from stabkit.tasks import generated_bytes

CLIENT_TENSORS = 6  # [R, 2, s, d] tensors alive during a local step (models, gradients, start, uploads, ...)
OUTPUT_COPIES = 2  # [R, 2, s, B, classes] tensors of a local step's backward (the logits and their gradient)
GIB = 1 << 30


def available_bytes(device=None):
    """Free memory of ``device`` (a torch device; None or CPU: the kernel's MemAvailable), or None if unknown."""
    if device is not None and device.type == "cuda":
        import torch

        return torch.cuda.mem_get_info(device)[0]
    alloc.release()  # the freed memory glibc keeps for reuse goes back first, so that MemAvailable counts it
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def require_memory(needed: float, what: str, fix: str, device=None) -> None:
    """Refuse (one line: estimate, what it is made of, available memory, what to change) if ``needed``
    bytes exceed the available memory."""
    free = available_bytes(device)
    if free is not None and needed > free:
        where = "GPU memory" if device is not None and device.type == "cuda" else "memory"
        raise ConfigError(f"invalid run size: {what} needs at least {needed / GIB:.1f} GiB but this machine has "
                          f"{free / GIB:.1f} GiB of {where} available; {fix}")


def require_generated_memory(task: str, opts) -> None:
    """Refuse task ``task`` if the arrays it generates from ``opts`` (its ``TaskOptions``) would not fit in
    memory, before they are generated (a task read from files or a plug-in: nothing to check here)."""
    require_memory(generated_bytes(task, opts), f"the {task} task's generated data",
                   "use fewer --clients or --samples-per-client, or a smaller --dim")


def run_bytes(cfg, task, d: int, algo, itemsize: int) -> tuple[float, str]:
    """Lower-bound bytes of a run of ``cfg`` on the built ``task`` with a ``d``-parameter model, and a
    short account of the largest part."""
    R, s = cfg.pairs, cfg.sampled_clients
    rows = task.num_clients + (R if cfg.perturb in ("sample", "remove-sample") else 0)
    sizes = np.array([len(y) for y in task.train_y])
    numel = math.prod(task.input_shape)
    xsize = 8 if np.issubdtype(task.train_x[0].dtype, np.integer) else itemsize
    n_val = sum(len(y) for y in task.val_y)
    extra = R * int(sizes.min()) if cfg.perturb in ("sample", "remove-sample") else 0  # a neighbour row per pair (a lower bound)
    data = (int(sizes.sum()) + extra + n_val + len(task.test_y)) * (numel * xsize + 8)
    state = R * 2 * d * itemsize * (1 + len(algo.server_state) + len(algo.client_state) * rows
                                    + CLIENT_TENSORS * s)
    batch = int(sizes.max()) if cfg.batch_size == "full" else cfg.batch_size
    inputs = R * 2 * s * batch * numel * xsize
    outputs = R * 2 * s * batch * max(1, task.num_classes) * itemsize * OUTPUT_COPIES
    parts = {f"data ({rows} client rows)": data,
             f"models and state ({R} pairs x 2 x {s} clients x {d:,} parameters)": state,
             f"one local step's inputs ({R * 2 * s} clients x batch {batch})": inputs,
             f"one local step's outputs ({R * 2 * s * batch} samples x {max(1, task.num_classes):,} outputs)": outputs}
    largest = max(parts, key=parts.get)
    return float(sum(parts.values())), largest
