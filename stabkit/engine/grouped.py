"""P models as one grouped model: any module ``torch.fx`` can trace into the layers of
``stabkit.engine.layers`` (Conv2d, GroupNorm, Linear, ReLU, MaxPool2d, global average pooling, flatten, any
elementwise layer registered there) and residual adds runs batched over P parameter vectors.

The generic path (``vmap(grad(functional_call))``) re-traces the module on every call and wraps every tensor
in batching and grad levels; ResNet-18-GN ran at 8% of the CPU's GEMM peak on it. Here the module is traced
once (``torch.fx``) and its graph is re-run with every model's channels side by side, as
:mod:`stabkit.engine.seqgrad` does for ``Sequential`` nets: activations ``[B, P*C, H, W]`` (model p owns
channel block p), convolutions as one grouped convolution (``groups=P``; on input shared by all models, one
convolution with every model's filters stacked), GroupNorm(G, C) as one native GroupNorm over ``P*G`` groups,
linear layers as batched matmuls ``[P, B, F]``, pooling, ReLU and residual adds on the whole batch; the
convolutions of the smallest maps as one batched matmul over the models (im2col on maps of at most 4 output
positions, the centre tap alone on 1x1 maps). Each layer's grouped forward, and how its parameters enter,
is its kind's (``stabkit.engine.layers``); this module traces the graph, runs it and assembles the gradient.
The backward is autograd's, run once on that graph of large native kernels (their backward kernels are the
hand-written ones seqgrad calls; writing them out again would only repeat them), so Hessian-vector
products come from a double backward through the same graph (:meth:`GroupedModel.hvp`). The parameters
enter it as one leaf per layer, in the layout that layer computes with, and the flat ``[P, d]`` gradient is
written once from those leaves' gradients (:class:`_Params`). Same numbers as ``torch.func`` to floating-point
rounding (tests, 1e-12 in float64).

:func:`compile_grouped` returns ``None`` for a module using anything else (the caller keeps ``torch.func``).
Shapes as in seqgrad: parameters ``theta [P, d]`` (flat, ``named_parameters`` order), inputs per model
``x [P, B, ...]`` or shared ``x [N, ...]``.
"""
from __future__ import annotations

import itertools
import math
import operator
from typing import Optional

import torch
from torch import nn

from stabkit.engine import forms
from stabkit.engine.layers import function_kind, kind_of


class _Plain:
    """A parameter as its slice of ``theta``, ``[P, n]`` (a view, no copy; a copy where models share their
    parameters); its gradient is copied into the flat gradient in whatever layout it arrives."""

    def make(self, part):
        return part.flatten(0, 1)

    def write(self, out, g):
        out.copy_(g)


_PLAIN = _Plain()


class _Params:
    """The P models' parameters ``theta [P, d]`` as the layers compute with them, each taken as a leaf of its own
    in its layer's layout (:class:`_Plain`, ``conv.ConvWeight``, ``conv.Tap``), and their gradients assembled
    into one flat ``[P, d]`` in one write per parameter. (Differentiating a ``torch.split`` of theta instead
    assembles it with a cat after the layers' own layout copies: on W5 the cat alone took 119 ms of a 1.3 s
    gradient.)

    ``theta`` may also be ``[Q, s, d]``, Q models each used by s consecutive models of the P = Q * s, typically
    a broadcast view (stride 0 over s): a round's first local step, where every client starts from x_t. Each
    layer then reads its parameters from the Q models into the layout it needs (a copy most of them take
    anyway), instead of P copies of x_t being written first."""

    def __init__(self, theta: torch.Tensor, numels: list):
        self.theta = theta.detach() if theta.dim() == 3 else theta.detach()[:, None]  # [Q, s, d]
        self.shape = (self.theta.shape[0] * self.theta.shape[1], self.theta.shape[2])  # [P, d]
        self.bounds = [0, *itertools.accumulate(numels)]
        self.taken = []  # (parameter index, layout, leaf)

    def take(self, i: int, layout=_PLAIN) -> torch.Tensor:
        part = self.theta[..., self.bounds[i]:self.bounds[i + 1]]
        leaf = layout.make(part).detach().requires_grad_(True)
        self.taken.append((i, layout, leaf))
        return leaf

    @property
    def leaves(self) -> list:
        return [leaf for _, _, leaf in self.taken]

    def like(self, v: torch.Tensor) -> list:
        """Another ``[P, d]`` (a direction) cut into the taken parameters' layouts, in the leaves' order."""
        return [layout.make(v[:, None, self.bounds[i]:self.bounds[i + 1]]) for i, layout, _ in self.taken]

    def gradient(self, loss: torch.Tensor) -> torch.Tensor:
        """d loss / d theta ``[P, d]``."""
        return self.flat(torch.autograd.grad(loss, self.leaves, allow_unused=True))

    @torch.no_grad()
    def flat(self, grads) -> torch.Tensor:
        """The leaves' gradients (or any tensors shaped like the leaves) as one ``[P, d]``; a parameter taken
        twice (a module called twice) gets the sum, one never used zeros."""
        out = self.theta.new_empty(self.shape)
        done = set()
        for (i, layout, leaf), g in zip(self.taken, grads):
            part = out[:, self.bounds[i]:self.bounds[i + 1]]
            g = torch.zeros_like(leaf) if g is None else g
            if i in done:
                more = torch.empty_like(part)
                layout.write(more, g)
                part.add_(more)
            else:
                layout.write(part, g)
                done.add(i)
        for i in set(range(len(self.bounds) - 1)) - done:
            out[:, self.bounds[i]:self.bounds[i + 1]].zero_()
        return out


def _module_rule(m: nn.Module):
    """The grouped forward of a leaf module (its kind's, ``stabkit.engine.layers``), or None."""
    kind = kind_of(m)
    return kind.grouped if kind is not None else None


class _Tracer(torch.fx.Tracer):
    """Stops at every module with a grouped rule (GroupNorm subclasses included) and, as torch.fx does, at
    torch's own modules (one without a rule, e.g. ``nn.LSTM``, makes the model unsupported)."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return _module_rule(m) is not None or super().is_leaf_module(m, qualname)


_ADD = {operator.add, torch.add}


class GroupedModel:
    """Batched losses, gradients and Hessian-vector products of P copies of one traced module."""

    def __init__(self, module: nn.Module, graph: torch.fx.Graph, kind: str):
        self.kind = kind
        names = [n for n, _ in module.named_parameters()]
        numels = [p.numel() for p in module.parameters()]
        self.numels = numels
        index = {n: i for i, n in enumerate(names)}
        self.steps = []  # (node name, "module" | "call", rule (with module and parameter indices), args)
        for node in graph.nodes:
            if node.op == "call_module":
                m = module.get_submodule(node.target)
                ids = [index[f"{node.target}.{n}"] for n, _ in m.named_parameters()]
                self.steps.append((node.name, "module", (_module_rule(m), m, ids), node.args))
            elif node.op in ("call_function", "call_method"):
                self.steps.append((node.name, "call", _call_rule(node.op, node.target, node.args, node.kwargs),
                                   node.args))
            elif node.op == "placeholder":
                self.input = node.name
            elif node.op == "output":
                self.output = node.args[0].name

    def forward(self, params: _Params, x: torch.Tensor, batched: bool) -> torch.Tensor:
        """Output ``[P, B|N, out]`` of the models ``params`` holds on ``x [P, B, ...]`` (batched) or ``[N, ...]``."""
        P = params.shape[0]
        env = {self.input: (x, "models" if batched else "shared")}
        for name, op, rule, args in self.steps:
            if op == "module":
                rule, m, ids = rule
                h, form = env[args[0].name]
                env[name] = rule(m, lambda j, layout=_PLAIN, ids=ids: params.take(ids[j], layout), h, form, P)
            else:
                env[name] = rule(env, args, P)
        out, form = env[self.output]
        return forms.to_models(out, form, P)

    def _losses(self, out, y, metrics: bool):
        if self.kind == "regression":
            diff = out[..., 0] - y
            loss = 0.5 * diff * diff
            return loss, (torch.full_like(diff, math.nan) if metrics else None)
        logp = torch.log_softmax(out, dim=-1)
        yy = y.expand(out.shape[:-1])[..., None]
        loss = -logp.gather(-1, yy)[..., 0]
        return loss, ((out.argmax(-1) == yy[..., 0]).to(out.dtype) if metrics else None)

    def _weights(self, out, w):
        return torch.full(out.shape[:2], 1.0 / out.shape[1], dtype=out.dtype, device=out.device) if w is None \
            else w / w.sum(1, keepdim=True)

    def grads(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
              w: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Gradient of the mean (or ``w``-weighted mean) minibatch loss, per model: ``[P, d]``; ``theta`` is
        ``[P, d]``, or ``[Q, s, d]`` where s consecutive models share their parameters (:class:`_Params`)."""
        with torch.enable_grad():
            params = _Params(theta, self.numels)
            out = self.forward(params, x, batched=True)
            loss, _ = self._losses(out, y, metrics=False)
            return params.gradient((loss * self._weights(out, w)).sum())

    def evaluate(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor,
                 batched: bool = False):
        """Shared data x ``[N, ...]`` (or per model ``[Q, N, ...]`` with ``batched``): gradient of
        sum_n w[q, n] loss_n, per-sample losses, correctness."""
        with torch.enable_grad():
            params = _Params(theta, self.numels)
            loss, correct = self._losses(self.forward(params, x, batched=batched), y, metrics=True)
            g = params.gradient((loss * w).sum())
        return g, loss.detach(), correct

    @torch.no_grad()
    def eval_losses(self, theta: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
        return self._losses(self.forward(_Params(theta, self.numels), x, batched=False), y, metrics=True)

    def hvp(self, theta: torch.Tensor, v: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
            w: torch.Tensor) -> torch.Tensor:
        """Hessian-vector products ``[Q, d]`` of F_q = sum_n w[q, n] loss_n on shared data ``x [N, ...]``:
        a double backward through the grouped graph (the models are independent, so the Hessian of the sum
        over models is block diagonal and one call gives every model's product). Taken per layer (:class:`_Params`),
        ``v`` in each parameter's layout: a weight's taps that the loss does not see have zero Hessian rows."""
        with torch.enable_grad():
            params = _Params(theta, self.numels)
            loss, _ = self._losses(self.forward(params, x, batched=False), y, metrics=False)
            leaves, directions = params.leaves, params.like(v)
            g = torch.autograd.grad((loss * w).sum(), leaves, create_graph=True, allow_unused=True)
            used = [i for i, gi in enumerate(g) if gi is not None and gi.requires_grad]
            hv = dict(zip(used, torch.autograd.grad([g[i] for i in used], [leaves[i] for i in used],
                                                    [directions[i] for i in used], allow_unused=True)))
            return params.flat([hv.get(i) for i in range(len(g))])


def _add_call(env, args, P):
    """A residual add; operands in different forms meet in the grouped (4-d) or models form."""
    (a, fa), (b, fb) = env[args[0].name], env[args[1].name]
    if fa != fb:
        a, b = (forms.to_grouped(t, f, P) if t.dim() == 4 + (f == "models") else forms.to_models(t, f, P)
                for t, f in ((a, fa), (b, fb)))
        fa = "grouped" if a.dim() == 4 else "models"
    return a + b, fa


def _call_rule(op: str, target, args: tuple, kwargs: dict):
    """The grouped counterpart ``rule(env, args, P)`` of a traced function or method call (a layer kind's
    function, ``stabkit.engine.layers``, or a residual add), or None."""
    kind = function_kind(op, target, args, kwargs)
    if kind is not None and kind.grouped is not None:
        return lambda env, args, P: kind.grouped(None, None, *env[args[0].name], P)
    tensors = [a for a in args if isinstance(a, torch.fx.Node)]
    if op == "call_function" and target in _ADD and not kwargs and len(args) == 2 and len(tensors) == 2:
        return _add_call
    return None


def compile_grouped(module: nn.Module, kind: str) -> Optional[GroupedModel]:
    """A :class:`GroupedModel` for ``module`` if ``torch.fx`` traces it into supported operations (every
    model of :mod:`stabkit.models.registry` but ``char_lstm``), else ``None``."""
    if not any(True for _ in module.parameters()):
        return None
    try:
        graph = _Tracer().trace(module)
    except Exception:  # noqa: BLE001 -- data-dependent control flow and the like: not traceable
        return None
    if sum(node.op == "placeholder" for node in graph.nodes) != 1:
        return None
    for node in graph.nodes:
        if node.op == "get_attr":
            return None
        if node.op == "call_module" and (_module_rule(module.get_submodule(node.target)) is None
                                         or len(node.args) != 1 or node.kwargs):
            return None
        if node.op in ("call_function", "call_method") and _call_rule(
                node.op, node.target, node.args, node.kwargs) is None:
            return None
    return GroupedModel(module, graph, kind)

