"""Hand-written batched forward/backward for ``Sequential`` nets of Conv2d, MaxPool2d, ReLU, Flatten, Linear.

For the models of stability studies (logistic regression, MLPs, LeNet-5, the FedAvg CNN, VGG-11) the cost
of ``vmap(grad(functional_call))`` is largely dispatch overhead and poorly batched kernels: every call
re-traces the module, wraps tensors in batching/grad levels, recomputes max-pool forwards inside their
backward and decomposes the loss. This module writes backpropagation out per layer, batched over ``P``
models: linear layers are batched ``matmul``s; convolutions keep every model's channels side by side
(``[B, P*C, H, W]``, model p owning channel block p) and run as one grouped convolution (or, on inputs
shared by all models, one convolution with all models' filters stacked), whose weight and input
gradients come from one ``convolution_backward`` call; pooling and ReLU need no per-model weights and run
on the whole batch. Same numbers as ``torch.func`` up to floating-point rounding (tests). :func:`compile_seq`
returns ``None`` for any other architecture, and :class:`~stabkit.engine.flatmodel.FlatModel` keeps the generic path.

Shapes: parameters ``theta [P, d]`` (flat, in ``named_parameters`` order); inputs either per model
``x [P, B, ...]`` or shared ``x [N, ...]`` (broadcast over the P models, as in evaluation).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn


def conv_format(device: torch.device) -> torch.memory_format:
    """Memory format of the grouped convolutions: channels-last on the CPU (oneDNN's grouped kernels ran
    2-5x faster in it), the default on CUDA (cuDNN: LeNet-5 gradient of 160 clients 4.8 ms vs 9.0 ms in
    channels-last on an H100; the FedAvg CNN and VGG-11 equal)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


# Each layer class below mirrors one nn module:
#   forward(h, form, theta, P) -> (output, output form, saved)   theta: this layer's slice [P, numel]
#   backward(dh, saved, need_input) -> (input gradient or None, [parameter gradients [P, n] in order])
# Activation forms: "shared" [N, ...] (no model axis yet), "models" [P, B, ...], "grouped" [B, P*C, H, W].


class Linear:
    """nn.Linear: batched matmuls over the P models."""

    def __init__(self, m: nn.Linear):
        self.out, self.inp, self.bias = m.out_features, m.in_features, m.bias is not None
        self.numel = self.out * self.inp + (self.out if self.bias else 0)

    def macs(self, y: torch.Tensor) -> int:
        """Multiply-accumulates of one sample's product, given this layer's output for one sample."""
        return self.out * self.inp

    def forward(self, h, form, theta, P):
        w = theta[:, : self.out * self.inp].view(P, self.out, self.inp)
        b = theta[:, None, self.out * self.inp:] if self.bias else None
        if h.dim() == 3 and b is not None:  # [P, B, in]: bias and product in one baddbmm (no matmul reshapes)
            return torch.baddbmm(b, h, w.transpose(1, 2)), "models", (h, w)
        y = torch.matmul(h, w.transpose(1, 2))  # [P, B, out]; a shared [N, in] broadcasts over models
        return (y if b is None else y.add_(b)), "models", (h, w)

    def backward(self, dh, saved, need_input):
        h, w = saved
        gw = torch.bmm(dh.transpose(1, 2), h) if h.dim() == 3 else torch.matmul(dh.transpose(1, 2), h)
        grads = [gw.flatten(1)]
        if self.bias:
            grads.append(dh.sum(1))
        return (torch.bmm(dh, w) if need_input else None), grads


class Conv2d:
    """nn.Conv2d (groups=1, zero padding): one grouped convolution over all P models' channel blocks."""

    def __init__(self, m: nn.Conv2d):
        self.m, self.bias = m, m.bias is not None
        self.wshape = tuple(m.weight.shape)  # (O, C, k, k)
        self.numel = m.weight.numel() + (self.wshape[0] if self.bias else 0)

    def macs(self, y: torch.Tensor) -> int:
        """Multiply-accumulates of one sample's convolution, given its output ``[1, O, H', W']``."""
        return math.prod(self.wshape) * y.shape[-2] * y.shape[-1]

    def forward(self, h, form, theta, P):
        O, nw = self.wshape[0], math.prod(self.wshape)
        w = theta[:, :nw].reshape(P * O, *self.wshape[1:])
        b = theta[:, nw:].reshape(P * O) if self.bias else None
        if form == "models":  # [P, B, C, H, W] -> [B, P*C, H, W]
            h = h.transpose(0, 1).flatten(1, 2)
        groups = 1 if form == "shared" else P
        fmt = conv_format(h.device)
        h, w = h.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)
        m = self.m
        y = F.conv2d(h, w, b, m.stride, m.padding, m.dilation, groups)
        return y, "grouped", (h, w, groups, P)

    def backward(self, dh, saved, need_input):
        h, w, groups, P = saved
        m = self.m
        gi, gw, gb = torch.ops.aten.convolution_backward(
            dh, h, w, [w.shape[0]] if self.bias else None, m.stride, m.padding, m.dilation, False, [0, 0],
            groups, [need_input, True, self.bias])
        grads = [gw.reshape(P, -1)] + ([gb.reshape(P, -1)] if self.bias else [])
        return gi, grads


class ReLU:
    """nn.ReLU on any form (no parameters)."""
    numel = 0

    def forward(self, h, form, theta, P):
        y = torch.relu(h)
        return y, form, y

    def backward(self, dh, saved, need_input):
        return torch.ops.aten.threshold_backward(dh, saved, 0), []


class MaxPool2d:
    """nn.MaxPool2d on the whole batch, indices kept for the backward."""
    numel = 0

    def __init__(self, m: nn.MaxPool2d):
        pair = lambda v: [v, v] if isinstance(v, int) else list(v)  # noqa: E731
        stride = m.stride if m.stride is not None else m.kernel_size
        self.args = (pair(m.kernel_size), pair(stride), pair(m.padding), pair(m.dilation), m.ceil_mode)

    def forward(self, h, form, theta, P):
        lead = h.shape[:2] if form == "models" else None
        if lead is not None:
            h = h.flatten(0, 1)
        y, idx = torch.ops.aten.max_pool2d_with_indices(h, *self.args)
        return (y if lead is None else y.unflatten(0, lead)), form, (h, idx, lead)

    def backward(self, dh, saved, need_input):
        h, idx, lead = saved
        if lead is not None:
            dh = dh.flatten(0, 1)
        gi = torch.ops.aten.max_pool2d_with_indices_backward(dh, h, *self.args, idx)
        return (gi if lead is None else gi.unflatten(0, lead)), []


class GlobalAvgPool:
    """``AdaptiveAvgPool2d(1)``: the mean over the spatial axes."""
    numel = 0

    def forward(self, h, form, theta, P):
        return h.mean((-2, -1), keepdim=True), form, h.shape

    def backward(self, dh, saved, need_input):
        return dh.expand(saved) / (saved[-1] * saved[-2]), []


class Flatten:
    """nn.Flatten(1, -1): leaves the grouped conv layout for [P, B, features]."""
    numel = 0

    def forward(self, h, form, theta, P):
        if form == "grouped":  # [B, P*C, H, W] -> [P, B, C*H*W]
            y = h.reshape(h.shape[0], P, -1).transpose(0, 1)
            return y, "models", (form, h.shape)
        lead = 2 if form == "models" else 1
        return h.reshape(*h.shape[:lead], -1), form, (form, h.shape)

    def backward(self, dh, saved, need_input):
        form, shape = saved
        if form == "grouped":
            return dh.transpose(0, 1).reshape(shape), []
        return dh.reshape(shape), []


def _layer(m: nn.Module):
    """The hand-written counterpart of module m, or None if there is none."""
    t = type(m)
    if t is nn.Linear:
        return Linear(m)
    if t is nn.Conv2d and m.padding_mode == "zeros" and isinstance(m.padding, tuple) and m.groups == 1:
        return Conv2d(m)
    if t is nn.ReLU:
        return ReLU()
    if t is nn.MaxPool2d and not m.return_indices:
        return MaxPool2d(m)
    if t is nn.AdaptiveAvgPool2d and m.output_size in (1, (1, 1)):
        return GlobalAvgPool()
    if t is nn.Flatten and (m.start_dim, m.end_dim) == (1, -1):
        return Flatten()
    return None


class SeqGrad:
    """Batched loss gradients of one supported ``Sequential``; see the module docstring."""

    def __init__(self, layers: list, kind: str):
        self.layers, self.kind = layers, kind
        self.first_param = next(i for i, layer in enumerate(layers) if layer.numel)

    def forward(self, theta: torch.Tensor, x: torch.Tensor, batched: bool):
        """Output ``[P, B|N, out]`` and the saved activations for :meth:`backward`."""
        P, h, form = theta.shape[0], x, "models" if batched else "shared"
        saved, at = [], 0
        for layer in self.layers:
            h, form, keep = layer.forward(h, form, theta[:, at:at + layer.numel], P)
            at += layer.numel
            saved.append(keep)
        return h, saved

    @torch.no_grad()
    def flops_per_sample(self, input_shape: tuple) -> float:
        """FLOPs of one sample's loss forward + backward as ``torch.utils.flop_counter`` counts them — the
        products and convolutions: forward, weight gradient, and the input gradient of every parameter layer
        after the first — from the layer shapes of one forward pass (``tests/engine/test_seqgrad.py`` checks the two
        agree). Counted here because any dispatch mode's first use imports ``torch._dynamo`` (~1.3 s of a
        run's start-up)."""
        h, form, total = torch.zeros(1, *input_shape), "shared", 0
        theta = torch.zeros(1, sum(layer.numel for layer in self.layers))
        at = 0
        for i, layer in enumerate(self.layers):
            h, form, _ = layer.forward(h, form, theta[:, at:at + layer.numel], 1)
            at += layer.numel
            if layer.numel:
                total += 2 * layer.macs(h) * (3 if i > self.first_param else 2)
        return float(total)

    def backward(self, dout: torch.Tensor, saved: list) -> torch.Tensor:
        """Flat parameter gradient ``[P, d]`` from the output gradient ``dout [P, B, out]``."""
        grads, dh = [], dout
        for i in range(len(self.layers) - 1, self.first_param - 1, -1):
            dh, g = self.layers[i].backward(dh, saved[i], need_input=i > self.first_param)
            grads = g + grads
        return torch.cat(grads, dim=1)

    def losses(self, out: torch.Tensor, y: torch.Tensor, metrics: bool = True):
        """Per-sample losses ``[P, B]``, their gradient w.r.t. the output (unweighted) and correctness;
        ``metrics=False`` skips the losses and correctness (returned as None)."""
        if self.kind == "regression":
            diff = out[..., 0] - y
            if not metrics:
                return None, diff[..., None], None
            return 0.5 * diff * diff, diff[..., None], torch.full_like(diff, math.nan)
        if not metrics:
            return None, softmax_xent_grad(out, y, 1.0), None
        return softmax_xent(out, y)

    def grads(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
              w: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Gradient of the mean (or ``w``-weighted mean) minibatch loss, per model: ``[P, d]``."""
        out, saved = self.forward(theta, x, batched=True)
        scale = 1.0 / out.shape[1] if w is None else (w / w.sum(1, keepdim=True))[..., None]
        if self.kind == "regression":
            dout = (out[..., :1] - y[..., None]) * scale
        else:  # the 1/B (or weight) folded into the softmax normalisation: one op fewer per step
            dout = softmax_xent_grad(out, y, scale)
        return self.backward(dout, saved)

    def evaluate(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
                 batched: bool = False):
        """Shared data x ``[N, ...]`` (or per model ``[Q, N, ...]`` with ``batched``): gradient of
        sum_n w[q, n] loss_n, per-sample losses, correctness."""
        out, saved = self.forward(theta, x, batched=batched)
        loss, dout, correct = self.losses(out, y)
        return self.backward(dout * w[..., None], saved), loss, correct

    def eval_losses(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
        out, _ = self.forward(theta, x, batched=False)
        loss, _, correct = self.losses(out, y)
        return loss, correct


def softmax_xent_grad(out: torch.Tensor, y: torch.Tensor, scale) -> torch.Tensor:
    """``scale * (softmax(out) - onehot(y))`` over the last axis: the cross-entropy gradient w.r.t. the
    logits ``out [..., C]`` for labels ``y`` (broadcast to ``out.shape[:-1]``), ``scale`` a float or a
    tensor ``[..., 1]`` (1/B, or per-sample weights).

    Written out instead of ``exp(log_softmax(out))``: torch 2.13's CPU ``log_softmax``/``softmax`` over a
    last axis of 10 classes fall off a performance cliff (W1, [160, 10, 10] logits on one thread: 332 us for
    the old log_softmax-exp-scatter sequence, 89 us for this one), and the shift by the row maximum keeps it
    as safe from overflow as ``log_softmax``. Equal to ``torch.func``'s gradient to float rounding
    (``tests/engine/test_seqgrad.py``)."""
    e = (out - out.amax(-1, keepdim=True)).exp_()
    e.mul_(e.sum(-1, keepdim=True).reciprocal_().mul_(scale))
    yy = y.expand(out.shape[:-1])[..., None]
    minus = torch.full_like(yy, -scale, dtype=e.dtype) if isinstance(scale, float) else (-scale).expand(yy.shape)
    return e.scatter_add_(-1, yy, minus)


def softmax_xent(out: torch.Tensor, y: torch.Tensor):
    """Per-sample cross-entropy losses, their (unscaled) gradient w.r.t. the logits and correctness, from one
    shifted exponential (the same formulation as :func:`softmax_xent_grad`, no ``log_softmax``)."""
    z = out - out.amax(-1, keepdim=True)
    e = z.exp()
    total = e.sum(-1, keepdim=True)
    yy = y.expand(out.shape[:-1])[..., None]
    loss = (total.log() - z.gather(-1, yy))[..., 0]
    dout = e.div_(total).scatter_add_(-1, yy, torch.full_like(yy, -1, dtype=e.dtype))
    correct = (out.argmax(-1) == yy[..., 0]).to(out.dtype)
    return loss, dout, correct


def compile_seq(module: nn.Module, kind: str) -> Optional[SeqGrad]:
    """A :class:`SeqGrad` for ``module`` if it is a ``Sequential`` of supported layers that starts with a
    Flatten or a Conv2d (every model of :mod:`stabkit.models.registry` but ``resnet18_gn`` and ``char_lstm``), else
    ``None``."""
    if not isinstance(module, nn.Sequential) or len(module) == 0:
        return None
    layers = [_layer(m) for m in module]
    if any(layer is None for layer in layers) or not isinstance(layers[0], (Flatten, Conv2d)):
        return None
    if not any(layer.numel for layer in layers):
        return None
    # ReLU then max-pool equals max-pool then ReLU, values and gradients alike (ties included: a window's
    # first maximum is the same before and after the ReLU, and both kill the gradient of a window whose
    # maximum is <= 0); swapped, the ReLU and its backward touch a quarter of the elements.
    for i in range(len(layers) - 1):
        if isinstance(layers[i], ReLU) and isinstance(layers[i + 1], MaxPool2d):
            layers[i], layers[i + 1] = layers[i + 1], layers[i]
    return SeqGrad(layers, kind)
