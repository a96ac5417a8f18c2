"""The built-in models: one row each (what it is, the task kind it needs, its size on a reference input), without
importing torch.

``stabkit models`` lists this catalogue (so it starts in well under a second); ``build_model``
(``stabkit.models.registry``) builds a model with the factory of the same name (its ``FACTORIES`` table, as a
plug-in's factory). ``parameters`` is checked against the built modules by the tests, so a changed architecture
cannot leave a stale count here.
"""
from __future__ import annotations

from typing import NamedTuple


class ModelInfo(NamedTuple):
    """One built-in model: its description, the task kind it needs, and its parameter count on ``reference``
    ``(label, input shape, classes, integer inputs)``."""

    description: str
    kind: str  # "classification" | "regression"
    reference: tuple
    parameters: int


CIFAR10 = ("CIFAR-10 3x32x32", (3, 32, 32), 10, False)
CATALOGUE = {
    "logistic": ModelInfo("multinomial logistic regression (EMNIST-L in FedSAGD)", "classification",
                          ("EMNIST-L 1x28x28", (1, 28, 28), 10, False), 7_850),
    "mlp": ModelInfo("one hidden ReLU layer of --hidden units", "classification",
                     ("digits 1x8x8, hidden 64", (1, 8, 8), 10, False), 4_810),
    "cnn": ModelInfo("small CNN: conv 16, conv 32 (3x3, padded), 2x2 pools, linear head", "classification",
                     CIFAR10, 25_578),
    "linear": ModelInfo("least-squares regression without bias", "regression", ("60 features", (60,), 0, False), 60),
    "fedavg_cnn": ModelInfo("FedAvg CNN, FedSAGD Table 5: 5x5 convs 64, 64, 2x2 pools, FC 384, 192", "classification",
                            CIFAR10, 797_962),
    "lenet5": ModelInfo("LeNet-5: 5x5 convs 6, 16, 2x2 pools, FC 120, 84", "classification", CIFAR10, 62_006),
    "vgg11": ModelInfo("VGG-11 without BN, classifier 512-512-256 (FedSWA code)", "classification", CIFAR10,
                       9_617_034),
    "resnet18_gn": ModelInfo("ResNet-18 with GroupNorm(2), torchvision layout", "classification", CIFAR10,
                             11_181_642),
    "char_lstm": ModelInfo("Shakespeare: embedding 8, two LSTM layers of 100, linear on the last step",
                           "classification", ("Shakespeare 80 tokens", (80,), 80, True), 133_520),
}
MODELS = tuple(CATALOGUE)  # the built-in names, in the order `stabkit models` lists them
