"""The model names, what each is, and its size on the papers' input shapes, without importing torch.

``stabkit models`` lists this catalogue (so it starts in well under a second); ``build_model``
(``stabkit.models.registry``) builds the modules. ``PARAMETERS`` is checked against the built modules by
the tests, so a changed architecture cannot leave a stale count here.
"""
from __future__ import annotations

MODELS = ("logistic", "mlp", "cnn", "linear", "fedavg_cnn", "lenet5", "vgg11", "resnet18_gn", "char_lstm")
DESCRIPTIONS = {
    "logistic": "multinomial logistic regression (EMNIST-L in FedSAGD)",
    "mlp": "one hidden ReLU layer of --hidden units",
    "cnn": "small CNN: conv 16, conv 32 (3x3, padded), 2x2 pools, linear head",
    "linear": "least-squares regression without bias",
    "fedavg_cnn": "FedAvg CNN, FedSAGD Table 5: 5x5 convs 64, 64, 2x2 pools, FC 384, 192",
    "lenet5": "LeNet-5: 5x5 convs 6, 16, 2x2 pools, FC 120, 84",
    "vgg11": "VGG-11 without BN, classifier 512-512-256 (FedSWA code)",
    "resnet18_gn": "ResNet-18 with GroupNorm(2), torchvision layout",
    "char_lstm": "Shakespeare: embedding 8, two LSTM layers of 100, linear on the last step",
}
# (label, input shape, classes, integer inputs) on which each model's size is reported (CIFAR-10 by default).
CIFAR10_SHAPE = ("CIFAR-10 3x32x32", (3, 32, 32), 10, False)
REFERENCE_SHAPES = {name: CIFAR10_SHAPE for name in MODELS} | {
    "char_lstm": ("Shakespeare 80 tokens", (80,), 80, True),
    "logistic": ("EMNIST-L 1x28x28", (1, 28, 28), 10, False),
    "mlp": ("digits 1x8x8, hidden 64", (1, 8, 8), 10, False),
    "linear": ("60 features", (60,), 0, False),
}
PARAMETERS = {"logistic": 7_850, "mlp": 4_810, "cnn": 25_578, "linear": 60, "fedavg_cnn": 797_962,
              "lenet5": 62_006, "vgg11": 9_617_034, "resnet18_gn": 11_181_642, "char_lstm": 133_520}
