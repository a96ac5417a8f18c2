"""The layer protocol of the fast paths: one entry per layer kind says how the layer runs forward, how its
gradient runs backward and how its parameters enter, for the Sequential path (``stabkit.engine.seqgrad``)
and for the grouped model (``stabkit.engine.grouped``) alike. A model whose layers all have an entry that
accepts them runs on a fast path; any other keeps the generic ``torch.func`` path.

``KINDS`` maps an ``nn.Module`` type to its kind (:func:`kind_of` finds a module's; :func:`register` adds one).
A kind has

* ``accepts(m)``: whether module ``m``'s settings are supported (e.g. a convolution's padding mode);
* ``seq(m)``: the Sequential path's layer, or ``seq = None`` where the kind has none (GroupNorm). The layer has
  ``numel`` (its parameters: its slice of the flat ``theta [P, d]``, in ``named_parameters`` order, reaches
  ``forward`` as ``[P, numel]``), ``forward(h, form, theta, P) -> (y, form, saved)``,
  ``backward(dh, saved, need_input) -> (input gradient or None, [parameter gradients [P, n], in order])``,
  ``macs(y)`` where it has parameters (one sample's multiply-accumulates, from its output) and ``takes_input``
  (True: it may be a Sequential's first layer);
* ``grouped(m, take, h, form, P) -> (y, form)``: the grouped model's forward, its backward autograd's through
  it; parameter j enters as ``take(j)`` (its ``[P, n]`` slice of ``theta``) or ``take(j, layout)`` (an object with
  ``make(part)`` and ``write(out, grad)``: the layout the layer computes in, e.g. ``conv.ConvWeight``);
* ``functions`` and ``methods``: the torch functions and tensor methods that compute the same layer in a traced
  ``forward`` (``F.relu``, ``x.relu()``) on one tensor followed by arguments ``call_args`` accepts (none, or
  ``torch.flatten(x, 1)``'s 1) and keyword arguments among ``call_kwargs`` (``inplace=False``), run by the
  grouped model as ``grouped(None, None, h, form, P)``.

Activation forms (``stabkit.engine.forms``): ``"shared"`` ``[N, ...]``, ``"models"`` ``[P, B, ...]``,
``"grouped"`` ``[B, P*C, H, W]``. A parameter-free elementwise layer is one :class:`Elementwise` entry: its
function and its derivative (``tests/engine/test_layer_protocol.py`` adds ``nn.Tanh`` so and checks both paths
against ``torch.func``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from stabkit.engine import conv, forms


@dataclass(frozen=True)
class Kind:
    """A layer kind: see the module docstring."""
    seq: Optional[Callable]  # m -> the Sequential path's layer
    grouped: Optional[Callable]  # (m, take, h, form, P) -> (y, form)
    accepts: Callable = lambda m: True
    subclasses: bool = False  # also for subclasses of the registered type (same function, another forward)
    functions: tuple = ()
    methods: tuple = ()
    call_args: Callable = lambda rest: rest == ()  # the arguments after the tensor that the call may have
    call_kwargs: tuple = ()  # (name, value): keyword arguments the call may have


@dataclass(frozen=True)
class Elementwise:
    """A parameter-free elementwise layer ``y = forward(h)`` on any form; ``backward(dh, kept)`` is ``dh``
    times its derivative, from ``kept``: the output (``keep="output"``) or the input (``keep="input"``)."""
    forward_fn: Callable
    backward_fn: Callable
    keep: str = "output"
    functions: tuple = ()
    methods: tuple = ()
    subclasses: bool = False
    call_args: Callable = lambda rest: rest == ()
    call_kwargs: tuple = (("inplace", False),)  # as F.relu, F.silu, ... pass it on
    numel: int = field(default=0, init=False)
    takes_input: bool = field(default=False, init=False)

    def accepts(self, m) -> bool:
        return True

    def seq(self, m) -> "Elementwise":
        return self

    def grouped(self, m, take, h, form, P):
        return self.forward_fn(h), form

    def forward(self, h, form, theta, P):
        y = self.forward_fn(h)
        return y, form, (y if self.keep == "output" else h)

    def backward(self, dh, saved, need_input):
        return self.backward_fn(dh, saved), []


RELU = Elementwise(torch.relu, lambda dh, y: torch.ops.aten.threshold_backward(dh, y, 0),
                   functions=(torch.relu, F.relu), methods=("relu",))


class SeqLinear:
    """nn.Linear on the Sequential path: batched matmuls over the P models."""
    takes_input = False

    def __init__(self, m: nn.Linear):
        self.out, self.inp, self.bias = m.out_features, m.in_features, m.bias is not None
        self.numel = self.out * self.inp + (self.out if self.bias else 0)

    def macs(self, y: torch.Tensor) -> int:
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


def _grouped_linear(m: nn.Linear, take, h, form, P):
    w = take(0).view(P, m.out_features, m.in_features)
    if form == "grouped":
        h = forms.to_models(h, form, P)
    y = torch.matmul(h, w.transpose(1, 2))  # a shared [N, in] broadcasts over the models
    return (y if m.bias is None else y + take(1)[:, None]), "models"


class SeqMaxPool2d:
    """nn.MaxPool2d on the whole batch, indices kept for the backward."""
    numel, takes_input = 0, False

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


def _grouped_max_pool(m: nn.MaxPool2d, take, h, form, P):
    lead = h.shape[:2] if form == "models" else None
    y = F.max_pool2d(h if lead is None else h.flatten(0, 1), m.kernel_size, m.stride, m.padding, m.dilation,
                     m.ceil_mode)
    return (y if lead is None else y.unflatten(0, lead)), form


class SeqGlobalAvgPool:
    """``AdaptiveAvgPool2d(1)``: the mean over the spatial axes."""
    numel, takes_input = 0, False

    def forward(self, h, form, theta, P):
        return h.mean((-2, -1), keepdim=True), form, h.shape

    def backward(self, dh, saved, need_input):
        return dh.expand(saved) / (saved[-1] * saved[-2]), []


def _grouped_avg_pool(m, take, h, form, P):
    return h.mean((-2, -1), keepdim=True), form


class SeqFlatten:
    """nn.Flatten(1, -1): leaves the grouped conv layout for [P, B, features]."""
    numel, takes_input = 0, True

    def forward(self, h, form, theta, P):
        y, out_form = forms.flatten(h, form, P)
        return y, out_form, (form, h.shape)

    def backward(self, dh, saved, need_input):
        form, shape = saved
        if form == "grouped":
            return dh.transpose(0, 1).reshape(shape), []
        return dh.reshape(shape), []


def _grouped_flatten(m, take, h, form, P):
    return forms.flatten(h, form, P)


def _grouped_group_norm(m: nn.GroupNorm, take, h, form, P):
    """GroupNorm(G, C) of P models as one native GroupNorm over ``P*G`` groups of the grouped maps."""
    h = forms.to_grouped(h, form, P)
    return F.group_norm(h, P * m.num_groups, take(0).reshape(-1), take(1).reshape(-1), m.eps), "grouped"


KINDS: dict = {
    nn.Linear: Kind(SeqLinear, _grouped_linear),
    nn.Conv2d: Kind(conv.SeqConv2d, conv.grouped_conv, conv.supported),
    nn.ReLU: RELU,
    nn.MaxPool2d: Kind(SeqMaxPool2d, _grouped_max_pool, lambda m: not m.return_indices),
    nn.AdaptiveAvgPool2d: Kind(lambda m: SeqGlobalAvgPool(), _grouped_avg_pool,
                               lambda m: m.output_size in (1, (1, 1))),
    nn.Flatten: Kind(lambda m: SeqFlatten(), _grouped_flatten, lambda m: (m.start_dim, m.end_dim) == (1, -1),
                     functions=(torch.flatten,), methods=("flatten",), call_args=lambda rest: rest == (1,)),
    # stabkit's reshape-based GroupNorm (a subclass) included: the same function
    nn.GroupNorm: Kind(None, _grouped_group_norm, lambda m: m.affine, subclasses=True),
}


def register(module_type: type, kind) -> None:
    """Run modules of ``module_type`` on the fast paths as ``kind`` (a :class:`Kind` or :class:`Elementwise`)."""
    KINDS[module_type] = kind


def kind_of(m: nn.Module):
    """The kind of module ``m`` if one is registered for its type and accepts its settings, else None."""
    kind = KINDS.get(type(m))
    if kind is None:
        kind = next((k for t, k in KINDS.items() if k.subclasses and isinstance(m, t)), None)
    return kind if kind is not None and kind.accepts(m) else None


def function_kind(op: str, target, args: tuple, kwargs: dict):
    """The kind a traced ``call_function`` / ``call_method`` node computes (on its first argument, a node), or
    None."""
    if not args or not isinstance(args[0], torch.fx.Node) or any(isinstance(a, torch.fx.Node) for a in args[1:]):
        return None
    for kind in KINDS.values():
        named = target in kind.functions if op == "call_function" else target in kind.methods
        if named and kind.call_args(tuple(args[1:])) and set(kwargs.items()) <= set(kind.call_kwargs):
            return kind
    return None
