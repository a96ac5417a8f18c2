"""Plain convolutional nets of the papers: the FedAvg CNN (FedSAGD Table 5), LeNet-5 and VGG-11 (FedSWA)."""
from __future__ import annotations

from torch import nn


def _after_conv_pool(size: int, kernel: int, blocks: int) -> int:
    """Spatial size after ``blocks`` x (valid conv of ``kernel``, 2x2 max-pool)."""
    for _ in range(blocks):
        size = (size - kernel + 1) // 2
    return size


def conv_pool_net(shape: tuple, classes: int, channels: tuple, widths: tuple) -> nn.Sequential:
    """Valid 5x5 convs of ``channels`` (each + ReLU + 2x2 max-pool), then ReLU FC layers ``widths``, then the head.

    The FedAvg CNN of FedSAGD Table 5 is ``channels=(64, 64), widths=(384, 192)``: 32 -> 28 -> 14 -> 10 -> 5,
    FC 1600 -> 384 -> 192 -> C. LeNet-5 is ``channels=(6, 16), widths=(120, 84)`` (LeCun et al. 1998,
    with ReLU and max-pooling).
    """
    layers, c = [], shape[0]
    for out in channels:
        layers += [nn.Conv2d(c, out, 5), nn.ReLU(), nn.MaxPool2d(2)]
        c = out
    h, w = (_after_conv_pool(s, 5, len(channels)) for s in shape[1:])
    layers.append(nn.Flatten())
    width = c * h * w
    for out in widths:
        layers += [nn.Linear(width, out), nn.ReLU()]
        width = out
    return nn.Sequential(*layers, nn.Linear(width, classes))


VGG11 = (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M")


def vgg11(channels: int, classes: int) -> nn.Sequential:
    """VGG-11 (configuration A of Simonyan & Zisserman) without BatchNorm, as in the FedSWA code: 3x3 convs,
    a 1x1 adaptive average pool and the classifier 512-512-256-C (its dropout left out: the engine needs
    deterministic modules)."""
    layers, c = [], channels
    for v in VGG11:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU()]
            c = v
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, classes))
