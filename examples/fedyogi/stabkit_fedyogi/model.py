"""A model factory: ``tanh_mlp(task)`` is an MLP with tanh units for any classification task.

stabkit's hand-written fast path covers Linear/Conv2d/ReLU/MaxPool2d stacks only, so this model runs on the
generic ``torch.func`` path (same results, more overhead) -- as any architecture of your own does.
"""
import math

from torch import nn

HIDDEN = 32


def tanh_mlp(task) -> nn.Module:
    if task.kind != "classification":
        raise ValueError(f"tanh_mlp needs a classification task, {task.name!r} is {task.kind}")
    d = math.prod(task.input_shape)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, task.num_classes))
