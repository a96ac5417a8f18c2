"""What a run needs of a model, checked before the run allocates its state or writes anything.

Paired runs couple *everything* random or stateful between the two trajectories through keyed streams and
carried state. A layer with running statistics (BatchNorm) updates hidden buffers outside the flat
parameter vector, and Dropout draws masks from torch's global generator: neither can be coupled between
the trajectories (nor batched over clients with ``vmap``), so the measured discrepancy would mix in
uncoupled noise. They are refused with that reason (stabkit's own models use GroupNorm and no dropout).
The model must also accept the task's inputs and return one output per class (one for regression).
"""
from __future__ import annotations

import torch
from torch import nn

from stabkit.errors import ConfigError
from stabkit.plugins import describe_error


def check_module(module: nn.Module, task, label: str) -> None:
    """One-line ConfigError naming ``label`` unless ``module`` fits ``task``: no running-statistics or
    dropout layers, a forward pass on two of the task's inputs giving ``[2, num_classes]`` outputs
    (``[2, 1]`` or ``[2]`` for regression). The two zero inputs go where the module's parameters are (the
    ``meta`` device for a module built there: shapes only, nothing allocated)."""
    for name, layer in module.named_modules():
        reason = _uncoupled(layer)
        if reason:
            raise ConfigError(f"invalid model={label!r}: layer {name or '(root)'} ({type(layer).__name__}) {reason}")
    sample = task.train_x[0]
    dtype = torch.long if sample.dtype.kind in "iu" else torch.get_default_dtype()
    device = next((p.device for p in module.parameters()), torch.device("meta"))  # meta unless given built
    x = torch.zeros((2, *task.input_shape), dtype=dtype, device=device)
    try:
        with torch.no_grad():
            out = module(x)
    except Exception as e:  # wrong input width, wrong rank, ...
        raise ConfigError(f"invalid model={label!r}: its forward pass on the task's inputs (shape "
                          f"[batch, {', '.join(map(str, task.input_shape))}]) raised {describe_error(e)}") from None
    want = [(2, task.num_classes)] if task.kind == "classification" else [(2, 1), (2,)]
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else None
    if got not in want:
        what = f"outputs of shape {list(got)}" if got is not None else f"a {type(out).__name__}"
        raise ConfigError(f"invalid model={label!r}: returns {what} for a batch of 2, the {task.kind} task "
                          f"{task.name!r} needs {list(want[0])} (one output per "
                          f"{'class' if task.kind == 'classification' else 'sample'})")


def _uncoupled(layer: nn.Module) -> str | None:
    """Why ``layer`` cannot run in a paired trajectory (None if it can)."""
    if isinstance(layer, nn.modules.batchnorm._NormBase) and layer.track_running_stats:
        return ("keeps running statistics outside the parameters, which paired runs cannot couple or carry; "
                "use GroupNorm or LayerNorm (as resnet18_gn does), or track_running_stats=False")
    if isinstance(layer, nn.modules.dropout._DropoutNd) and layer.p > 0:
        return ("draws random masks from torch's global generator, which paired runs cannot couple between "
                "the trajectories; use p=0")
    return None
