"""Model zoo: plain ``torch.nn`` modules sized from a task.

No BatchNorm or dropout: the engine runs every model through ``torch.func.functional_call`` and
``vmap`` over clients, which needs stateless, deterministic modules. Inputs arrive as
``[B, *task.input_shape]``; classifiers return ``[B, num_classes]`` logits, ``linear`` returns ``[B, 1]``.

The papers' architectures (``stabkit.models``): ``fedavg_cnn`` (FedSAGD Table 5; FedSWA's code calls the same
net "LeNet-5"), ``lenet5`` (LeCun's, with ReLU and max-pool), ``vgg11`` (no BN), ``resnet18_gn``
(GroupNorm(2)) and ``char_lstm`` (the Shakespeare LSTM, on integer token inputs).

Plug-in models (``stabkit.plugins``): a factory ``factory(task) -> nn.Module`` named by an import path
``package.module:factory`` or an entry point of the group ``stabkit.models``. The same rules apply (no
BatchNorm or dropout; outputs as above); a module the hand-written fast path does not cover runs on the
generic ``torch.func`` path.
"""
from __future__ import annotations

import math
from typing import Callable

from torch import nn

from stabkit import plugins
from stabkit.errors import require
from stabkit.models.catalogue import CATALOGUE, MODELS
from stabkit.models.convnets import conv_pool_net, vgg11
from stabkit.models.lstm import VOCAB, CharLSTM
from stabkit.models.resnet import ResNet18GN
from stabkit.tasks.base import Task


def _flat_in(task: Task) -> int:
    return math.prod(task.input_shape)


def logistic(task: Task, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat_in(task), task.num_classes))


def mlp(task: Task, hidden: int) -> nn.Module:
    d, classes = _flat_in(task), task.num_classes
    return nn.Sequential(nn.Flatten(), nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def linear(task: Task, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(_flat_in(task), 1, bias=False))


def char_lstm(task: Task, hidden: int) -> nn.Module:
    integer = task.train_x[0].dtype.kind in "iu"
    require(integer and len(task.input_shape) == 1, "model", "char_lstm",
            f"needs integer token sequences [n, T], but task {task.name!r} has "
            f"{task.train_x[0].dtype} inputs of shape {task.input_shape}")
    return CharLSTM(VOCAB, task.num_classes)


def _cnn(shape: tuple, classes: int) -> nn.Module:
    """Two conv+ReLU+2x2-pool blocks and a linear head, for (C, H, W) inputs of at least 4x4."""
    channels, height, width = shape
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * (height // 4) * (width // 4), classes),
    )


def image_model(name: str, least: int, build: Callable) -> Callable:
    """The factory of an image model ``build(shape, classes)`` needing (C, H, W) inputs with H, W >= ``least``."""
    def factory(task: Task, hidden: int) -> nn.Module:
        shape = tuple(task.input_shape)
        require(len(shape) == 3 and min(shape[1:]) >= least, "model", name,
                f"needs image inputs (C, H, W) with H, W >= {least}, but the task's input shape is {shape}")
        return build(shape, task.num_classes)
    return factory


# name -> factory(task, hidden) of every built-in model (its row in the catalogue says what it is)
FACTORIES = {
    "logistic": logistic,
    "mlp": mlp,
    "cnn": image_model("cnn", 4, _cnn),
    "linear": linear,
    "fedavg_cnn": image_model("fedavg_cnn", 16,
                              lambda s, c: conv_pool_net(s, c, channels=(64, 64), widths=(384, 192))),
    "lenet5": image_model("lenet5", 16, lambda s, c: conv_pool_net(s, c, channels=(6, 16), widths=(120, 84))),
    "vgg11": image_model("vgg11", 32, lambda s, c: vgg11(s[0], c)),
    "resnet18_gn": image_model("resnet18_gn", 1, lambda s, c: ResNet18GN(s[0], c)),
    "char_lstm": char_lstm,
}


def build_model(name: str, task: Task, hidden: int = 64) -> nn.Module:
    """Build model ``name`` (one of :data:`MODELS`, or a plug-in factory) for ``task``; ``hidden`` is the MLP width.

    ``linear`` is for regression tasks only, the others for classification tasks only; ``char_lstm``
    needs integer token sequences of LEAF's 80-character alphabet.
    """
    if name not in FACTORIES:
        return _plugin_model(name, task)
    require(hidden >= 1, "hidden", hidden, "an integer >= 1")
    wanted = CATALOGUE[name].kind
    require(task.kind == wanted, "model", name,
            f"model {name!r} needs a {wanted} task, but task {task.name!r} is {task.kind}")
    return FACTORIES[name](task, hidden)


def _plugin_model(name: str, task: Task) -> nn.Module:
    """``factory(task)`` of the plug-in model ``name``, checked to be an ``nn.Module`` with parameters."""
    factory = plugins.resolve("model", name, MODELS, "package.module:factory")
    require(callable(factory), "model", name, f"a factory task -> torch.nn.Module, not {factory!r}")
    module = plugins.call("model", name, factory, task)
    require(isinstance(module, nn.Module) and any(True for _ in module.parameters()), "model", name,
            f"a factory returning a torch.nn.Module with parameters, but it returned {type(module).__name__}")
    return module
