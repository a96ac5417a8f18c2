"""Hand-written batched forward/backward for ``Sequential`` models of Flatten, Linear and ReLU layers.

For the small models of stability studies (logistic regression, MLPs, linear regression) the cost of
``vmap(grad(functional_call))`` is almost all Python and dispatch overhead: every call re-traces the
module, wraps tensors in batching/grad levels and decomposes the loss. This module computes the same
gradients with a few ``matmul`` calls per layer (backpropagation written out), which is an order of
magnitude faster at these sizes and gives the same numbers up to floating-point rounding (checked
against ``torch.func`` in the tests). :func:`compile_mlp` returns ``None`` for any other architecture,
and :class:`~stabkit.flatmodel.FlatModel` then keeps the generic ``torch.func`` path.

Shapes: parameters ``theta [P, d]`` (flat, in ``named_parameters`` order); inputs either per model
``x [P, B, ...]`` or shared ``x [N, ...]`` (broadcast over the P models, as in evaluation).
"""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn


class MLPGrad:
    """Batched loss gradients of one Flatten/Linear/ReLU stack; ``layers``: ``("linear", (w, b)) | ("relu",)``."""

    def __init__(self, layers: list, kind: str):
        self.layers, self.kind = layers, kind

    def _flat_input(self, x: torch.Tensor, batched: bool) -> torch.Tensor:
        lead = 2 if batched else 1  # [P, B, ...] or [N, ...]
        return x.reshape(*x.shape[:lead], -1)

    def _params(self, theta: torch.Tensor) -> list:
        """Weight ``[P, out, in]`` and bias ``[P, 1, out]`` views into theta, per linear layer."""
        out, at = [], 0
        for layer in self.layers:
            if layer[0] != "linear":
                continue
            (o, i), bias = layer[1], layer[2]
            w = theta[:, at:at + o * i].view(-1, o, i)
            at += o * i
            b = None
            if bias:
                b = theta[:, None, at:at + o]
                at += o
            out.append((w, b))
        return out

    def forward(self, theta: torch.Tensor, x: torch.Tensor, batched: bool):
        """Output ``[P, B|N, out]`` and the saved activations for :meth:`backward`."""
        h = self._flat_input(x, batched)
        params = iter(self._params(theta))
        saved = []
        for layer in self.layers:
            if layer[0] == "linear":
                w, b = next(params)
                saved.append(("linear", h, w, b))
                h = torch.matmul(h, w.transpose(1, 2))
                if b is not None:
                    h = h + b
            else:
                saved.append(("relu", h > 0))
                h = torch.relu(h)
        return h, saved

    def backward(self, dout: torch.Tensor, saved: list) -> torch.Tensor:
        """Flat parameter gradient ``[P, d]`` from the output gradient ``dout [P, B, out]``."""
        grads = []
        dh = dout
        for i, entry in reversed(list(enumerate(saved))):
            if entry[0] == "relu":
                dh = dh * entry[1]
                continue
            _, h, w, b = entry
            if b is not None:
                grads.append(dh.sum(1))
            grads.append(torch.matmul(dh.transpose(1, 2), h).flatten(1))
            if i > 0:
                dh = torch.matmul(dh, w)
        return torch.cat(grads[::-1], dim=1)

    def losses(self, out: torch.Tensor, y: torch.Tensor, metrics: bool = True):
        """Per-sample losses ``[P, B]``, their gradient w.r.t. the output (unweighted) and correctness;
        ``metrics=False`` (the training hot path) skips the losses and correctness (returned as None)."""
        if self.kind == "regression":
            diff = out[..., 0] - y
            if not metrics:
                return None, diff[..., None], None
            return 0.5 * diff * diff, diff[..., None], torch.full_like(diff, math.nan)
        logp = torch.log_softmax(out, dim=-1)
        yy = y.expand(out.shape[:-1])[..., None]
        dout = logp.exp()
        dout.scatter_add_(-1, yy, torch.full_like(yy, -1, dtype=dout.dtype))
        if not metrics:
            return None, dout, None
        loss = -logp.gather(-1, yy)[..., 0]
        correct = (out.argmax(-1) == yy[..., 0]).to(out.dtype)
        return loss, dout, correct

    def grads(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
              w: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Gradient of the mean (or ``w``-weighted mean) minibatch loss, per model: ``[P, d]``."""
        out, saved = self.forward(theta, x, batched=True)
        _, dout, _ = self.losses(out, y, metrics=False)
        scale = 1.0 / out.shape[1] if w is None else (w / w.sum(1, keepdim=True))[..., None]
        return self.backward(dout * scale, saved)

    def evaluate(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
        """Shared data x ``[N, ...]``: gradient of sum_n w[q, n] loss_n, per-sample losses, correctness."""
        out, saved = self.forward(theta, x, batched=False)
        loss, dout, correct = self.losses(out, y)
        return self.backward(dout * w[..., None], saved), loss, correct

    def eval_losses(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
        out, _ = self.forward(theta, x, batched=False)
        loss, _, correct = self.losses(out, y)
        return loss, correct


def compile_mlp(module: nn.Module, kind: str) -> Optional[MLPGrad]:
    """An :class:`MLPGrad` for ``module`` if it is ``Sequential(Flatten(), ...)`` with only Linear and ReLU
    layers after the Flatten (every such model of :mod:`stabkit.models`), else ``None``."""
    if not isinstance(module, nn.Sequential) or len(module) < 2:
        return None
    first = module[0]
    if type(first) is not nn.Flatten or (first.start_dim, first.end_dim) != (1, -1):
        return None
    layers = []
    for m in list(module)[1:]:
        if type(m) is nn.Linear:
            layers.append(("linear", (m.out_features, m.in_features), m.bias is not None))
        elif type(m) is nn.ReLU:
            layers.append(("relu",))
        else:
            return None
    if not any(layer[0] == "linear" for layer in layers):
        return None
    return MLPGrad(layers, kind)
