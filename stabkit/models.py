"""Model zoo: small plain ``torch.nn`` modules sized from a task.

No BatchNorm or dropout: the engine runs every model through ``torch.func.functional_call`` and
``vmap`` over clients, which needs stateless, deterministic modules. Inputs arrive as
``[B, *task.input_shape]``; classifiers return ``[B, num_classes]`` logits, ``linear`` returns ``[B, 1]``.
"""
from __future__ import annotations

import math

from torch import nn

from stabkit.errors import require
from stabkit.tasks.base import Task

MODELS = ("logistic", "mlp", "cnn", "linear")


def _cnn(shape: tuple, classes: int) -> nn.Module:
    """Two conv+ReLU+2x2-pool blocks and a linear head, for (C, H, W) inputs of at least 4x4."""
    require(len(shape) == 3 and min(shape[1:]) >= 4, "model", "cnn",
            f"needs image inputs (C, H, W) with H, W >= 4, but the task's input shape is {shape}")
    channels, height, width = shape
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * (height // 4) * (width // 4), classes),
    )


def build_model(name: str, task: Task, hidden: int = 64) -> nn.Module:
    """Build model ``name`` (one of :data:`MODELS`) for ``task``; ``hidden`` is the MLP width.

    ``linear`` is for regression tasks only, the others for classification tasks only.
    """
    require(name in MODELS, "model", name, f"one of {', '.join(MODELS)}")
    require(hidden >= 1, "hidden", hidden, "an integer >= 1")
    wanted = "regression" if name == "linear" else "classification"
    require(task.kind == wanted, "model", name,
            f"model {name!r} needs a {wanted} task, but task {task.name!r} is {task.kind}")
    d = math.prod(task.input_shape)
    classes = task.num_classes
    if name == "logistic":
        return nn.Sequential(nn.Flatten(), nn.Linear(d, classes))
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, classes))
    if name == "cnn":
        return _cnn(tuple(task.input_shape), classes)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, 1, bias=False))
