"""ResNet-18 with GroupNorm (the papers' "ResNet-18-GN"): torchvision's ResNet-18 layout (7x7 stride-2 stem,
max-pool, four stages of two basic blocks, global average pool) with every BatchNorm replaced by
GroupNorm(2 groups), as in the FedSAGD / FedSWA reference code (the FedSAGD paper does not give the group count).
Written out here (torchvision is not a dependency); parameter names and counts match torchvision's
``resnet18(num_classes=C, norm_layer=lambda c: GroupNorm(2, c))``: 11,181,642 for C = 10.
"""
from __future__ import annotations

import torch
from torch import nn

GROUPS = 2


class GroupNorm(nn.GroupNorm):
    """``nn.GroupNorm`` computed from reshapes and means (same parameters, same result).

    ``F.group_norm`` clones its input in the "suggested" memory format, which under ``vmap`` fails for
    feature maps whose strides look channels-last (e.g. 1x1 maps of the last stage); this form has no clone.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = x.reshape(x.shape[0], self.num_groups, -1)
        mean = g.mean(-1, keepdim=True)
        var = (g - mean).pow(2).mean(-1, keepdim=True)
        g = ((g - mean) / torch.sqrt(var + self.eps)).reshape(x.shape)
        shape = (1, -1) + (1,) * (x.dim() - 2)
        return g * self.weight.reshape(shape) + self.bias.reshape(shape)


def _norm(channels: int) -> GroupNorm:
    return GroupNorm(GROUPS, channels)


class BasicBlock(nn.Module):
    """Two 3x3 convs with GroupNorm and an identity (or 1x1 conv + GroupNorm) shortcut."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = _norm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = _norm(cout)
        self.downsample = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), _norm(cout))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet18GN(nn.Module):
    """ResNet-18-GN for ``channels``-channel images and ``classes`` outputs; ``widths`` of the four stages
    (the papers' (64, 128, 256, 512); narrower ones make small instances for tests)."""

    def __init__(self, channels: int, classes: int, widths: tuple = (64, 128, 256, 512)):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, widths[0], 7, 2, 3, bias=False)
        self.bn1 = _norm(widths[0])
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin, stages = widths[0], []
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(cin, w, stride), BasicBlock(w, w, 1)))
            cin = w
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(widths[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))
