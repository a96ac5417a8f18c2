"""The activation forms of the fast paths (``stabkit.engine.layers``) and the conversions between them.

P models' activations travel in one of three forms: ``"shared"`` ``[N, ...]`` (the input every model sees,
no model axis yet), ``"models"`` ``[P, B, ...]`` and ``"grouped"`` ``[B, P*C, H, W]`` (feature maps with every
model's channels side by side, model p owning channel block p, so that P convolutions run as one grouped
convolution).
"""
from __future__ import annotations

import torch


def conv_format(device: torch.device) -> torch.memory_format:
    """Memory format of the grouped convolutions: channels-last on the CPU (oneDNN's grouped kernels ran
    2-5x faster in it), the default on CUDA (cuDNN: LeNet-5 gradient of 160 clients 4.8 ms vs 9.0 ms in
    channels-last on an H100; the FedAvg CNN and VGG-11 equal)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


def to_models(h, form, P):
    """Any form -> "models" ``[P, B, ...]`` (grouped maps split their channel blocks)."""
    if form == "models":
        return h
    if form == "shared":
        return h.expand(P, *h.shape)
    return h.unflatten(1, (P, -1)).transpose(0, 1)


def to_grouped(h, form, P):
    """A 4-d feature map in any form -> "grouped" ``[B, P*C, H, W]``."""
    if form == "grouped":
        return h
    return to_models(h, form, P).transpose(0, 1).flatten(1, 2)


def flatten(h, form, P, start=1):
    """``flatten(start)`` of every model's activations; grouped maps leave for ``[P, B, C*H*W]``."""
    if form == "grouped":
        return h.reshape(h.shape[0], P, -1).transpose(0, 1), "models"
    return h.flatten(start + (form == "models")), form
