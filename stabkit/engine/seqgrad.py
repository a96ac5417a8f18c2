"""Hand-written batched forward/backward for ``Sequential`` nets of the layers ``stabkit.engine.layers`` has
a Sequential form for (Conv2d, MaxPool2d, ReLU, global average pooling, Flatten, Linear, and any elementwise
layer registered there).

For the models of stability studies (logistic regression, MLPs, LeNet-5, the FedAvg CNN, VGG-11) the cost
of ``vmap(grad(functional_call))`` is largely dispatch overhead and poorly batched kernels: every call
re-traces the module, wraps tensors in batching/grad levels, recomputes max-pool forwards inside their
backward and decomposes the loss. This module writes backpropagation out per layer, batched over ``P``
models: linear layers are batched ``matmul``s; convolutions keep every model's channels side by side
(``[B, P*C, H, W]``, model p owning channel block p) and run as one grouped convolution (or, on inputs
shared by all models, one convolution with all models' filters stacked), whose weight and input
gradients come from one ``convolution_backward`` call; pooling and ReLU need no per-model weights and run
on the whole batch. Each layer's forward and backward is its kind's (``stabkit.engine.layers``); this module
runs them in order and holds the losses. Same numbers as ``torch.func`` up to floating-point rounding (tests). :func:`compile_seq`
returns ``None`` for any other architecture, and :class:`~stabkit.engine.flatmodel.FlatModel` keeps the generic path.

Shapes: parameters ``theta [P, d]`` (flat, in ``named_parameters`` order); inputs either per model
``x [P, B, ...]`` or shared ``x [N, ...]`` (broadcast over the P models, as in evaluation).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from stabkit.engine.layers import RELU, SeqMaxPool2d, kind_of


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
    """A :class:`SeqGrad` for ``module`` if it is a ``Sequential`` of layers with a Sequential form that starts
    with one that takes the input (Flatten or Conv2d; every model of :mod:`stabkit.models.registry` but
    ``resnet18_gn`` and ``char_lstm``), else ``None``."""
    if not isinstance(module, nn.Sequential) or len(module) == 0:
        return None
    kinds = [kind_of(m) for m in module]
    if any(k is None or k.seq is None for k in kinds):
        return None
    layers = [k.seq(m) for k, m in zip(kinds, module)]
    if not layers[0].takes_input or not any(layer.numel for layer in layers):
        return None
    # ReLU then max-pool equals max-pool then ReLU, values and gradients alike (ties included: a window's
    # first maximum is the same before and after the ReLU, and both kill the gradient of a window whose
    # maximum is <= 0); swapped, the ReLU and its backward touch a quarter of the elements.
    for i in range(len(layers) - 1):
        if layers[i] is RELU and isinstance(layers[i + 1], SeqMaxPool2d):
            layers[i], layers[i + 1] = layers[i + 1], layers[i]
    return SeqGrad(layers, kind)
