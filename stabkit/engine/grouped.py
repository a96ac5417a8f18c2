"""P models as one grouped model: any module ``torch.fx`` can trace into Conv2d, GroupNorm, Linear, ReLU,
MaxPool2d, global average pooling, flatten and residual adds runs batched over P parameter vectors.

The generic path (``vmap(grad(functional_call))``) re-traces the module on every call and wraps every tensor
in batching and grad levels; ResNet-18-GN ran at 8% of the CPU's GEMM peak on it. Here the module is traced
once (``torch.fx``) and its graph is re-run with every model's channels side by side, as
:mod:`stabkit.engine.seqgrad` does for ``Sequential`` nets: activations ``[B, P*C, H, W]`` (model p owns
channel block p), convolutions as one grouped convolution (``groups=P``; on input shared by all models, one
convolution with every model's filters stacked), GroupNorm(G, C) as one native GroupNorm over ``P*G`` groups,
linear layers as batched matmuls ``[P, B, F]``, pooling, ReLU and residual adds on the whole batch; the
convolutions of the smallest maps as one batched matmul over the models (im2col on maps of at most 4 output
positions, the centre tap alone on 1x1 maps). The
backward is autograd's, run once on that graph of large native kernels (their backward kernels are the
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
import torch.nn.functional as F
from torch import nn

from stabkit.engine.seqgrad import conv_format

# Activation forms: "shared" [N, ...] (no model axis yet), "models" [P, B, ...], "grouped" [B, P*C, H, W].


def _to_models(h, form, P):
    """Any form -> "models" ``[P, B, ...]`` (grouped maps split their channel blocks)."""
    if form == "models":
        return h
    if form == "shared":
        return h.expand(P, *h.shape)
    return h.unflatten(1, (P, -1)).transpose(0, 1)


def _to_grouped(h, form, P):
    """A 4-d feature map in any form -> "grouped" ``[B, P*C, H, W]``."""
    if form == "grouped":
        return h
    return _to_models(h, form, P).transpose(0, 1).flatten(1, 2)


# Output positions at or below which a per-model convolution runs as im2col + one bmm over the models, per
# device type: on the CPU oneDNN's grouped kernels win above 2x2 maps; on an H100 cuDNN's grouped kernels
# spend a third of ResNet-18-GN's step in layout transposes, and im2col + bmm up to 16x16 maps made its
# gradient 1.26x faster (40 models x B = 50: 58.1 -> 46.0 ms; 4x4 47.9, 8x8 46.9, 32x32 47.1;
# benchmarks/gpu_probe.py --small-map)
SMALL_MAP = {"cpu": 4, "cuda": 256}


class _Plain:
    """A parameter as its slice of ``theta``, ``[P, n]`` (a view, no copy; a copy where models share their
    parameters); its gradient is copied into the flat gradient in whatever layout it arrives."""

    def make(self, part):
        return part.flatten(0, 1)

    def write(self, out, g):
        out.copy_(g)


_PLAIN = _Plain()


class _ConvWeight:
    """A grouped convolution's filters ``[P*O, C, kh, kw]`` in the convolution's memory format, made in one copy
    (a reshape, then a second copy into channels-last, before), and their gradient written back in one."""

    def __init__(self, m: nn.Conv2d, fmt):
        self.shape, self.fmt = (m.out_channels, *m.weight.shape[1:]), fmt

    def make(self, part):
        Q, s = part.shape[:2]
        w = torch.empty(Q * s * self.shape[0], *self.shape[1:], dtype=part.dtype, device=part.device,
                        memory_format=self.fmt)
        w.view(Q, s, *self.shape).copy_(part.view(Q, s, *self.shape))
        return w

    def write(self, out, g):
        out.view(out.shape[0], *self.shape).copy_(g.unflatten(0, (out.shape[0], self.shape[0])))


class _Tap:
    """Column ``tap`` of a convolution's filters ``[P, O*C, kh*kw]``, as ``[P, O*C]`` (:func:`_centre_tap`): the
    only weights the output depends on. Their gradient goes back into the tap's column and zeros into the other
    taps' (an autograd select and the flat gradient's cat wrote that block twice more)."""

    def __init__(self, tap: int, taps: int):
        self.tap, self.taps = tap, taps

    def make(self, part):
        return part.unflatten(-1, (-1, self.taps))[..., self.tap].flatten(0, 1).contiguous()

    def write(self, out, g):
        block = out.unflatten(1, (-1, self.taps))
        block.zero_()
        block[..., self.tap] = g


class _Params:
    """The P models' parameters ``theta [P, d]`` as the layers compute with them, each taken as a leaf of its own
    in its layer's layout (:class:`_Plain`, :class:`_ConvWeight`, :class:`_Tap`), and their gradients assembled
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


def _conv(m: nn.Conv2d, take, h, form, P):
    if form != "shared":
        h = _to_grouped(h, form, P)
        tap = _centre_tap(m, h)
        if tap is not None:
            return _conv_point(m, take, h, P, tap), "grouped"
        if math.prod(_out_size(m, h)) <= SMALL_MAP.get(h.device.type, 4):
            return _conv_bmm(m, take, h, P), "grouped"
    fmt = conv_format(h.device)
    w = take(0, _ConvWeight(m, fmt))
    b = take(1).reshape(P * m.out_channels) if m.bias is not None else None
    groups = 1 if form == "shared" else P
    y = F.conv2d(h.contiguous(memory_format=fmt), w, b, m.stride, m.padding, m.dilation, groups)
    return y, "grouped"


def _out_size(m: nn.Conv2d, h) -> list:
    """Output height and width of convolution m on feature maps h."""
    return [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in
            zip(h.shape[-2:], m.kernel_size, m.stride, m.padding, m.dilation)]


def _conv_bmm(m: nn.Conv2d, take, h, P):
    """A grouped convolution on small maps (ResNet's last stages at CIFAR size: 2x2 and 1x1) as im2col and
    one batched matmul per model: oneDNN's grouped kernels ran these at 1-3 GFLOP/s on one core, the
    bmm at 5-14 (fp32, forward + backward, 16 models x 16 images). Same sums, in another order."""
    B, (Ho, Wo) = h.shape[0], _out_size(m, h)
    O, taps = m.out_channels, m.weight[0].numel()
    cols = F.unfold(h, m.kernel_size, m.dilation, m.padding, m.stride)  # [B, P*C*k*k, L]
    cols = cols.view(B, P, taps, Ho * Wo).permute(1, 2, 0, 3).reshape(P, taps, B * Ho * Wo)
    # weights [P, O, taps] read in place (batch stride d) and their gradient made in that layout: no copies
    y = torch.bmm(take(0).view(P, O, taps), cols)  # [P, O, B*L]
    if m.bias is not None:
        y = y + take(1)[:, :, None]
    return y.view(P, O, B, Ho * Wo).permute(2, 0, 1, 3).reshape(B, P * O, Ho, Wo)


def _centre_tap(m: nn.Conv2d, h) -> Optional[int]:
    """The one kernel tap that sees a 1x1 input map where convolution m has a 1x1 output there (on the CPU),
    else None: ResNet-18-GN's last-stage 3x3 convolutions (padding 1) at CIFAR size see their 1x1 maps through
    the centre tap alone; the other eight taps see only zero padding and add nothing."""
    (kh, kw), (ph, pw) = m.kernel_size, m.padding
    if (h.device.type != "cpu" or tuple(h.shape[-2:]) != (1, 1) or _out_size(m, h) != [1, 1]
            or m.dilation != (1, 1) or kh * kw == 1 or ph >= kh or pw >= kw):
        return None
    return ph * kw + pw


def _conv_point(m: nn.Conv2d, take, h, P, tap):
    """A convolution of a 1x1 map to a 1x1 map (:func:`_centre_tap`) as one batched matmul over the models with
    the tap that sees the input (:class:`_Tap`): ResNet-18-GN's 512-channel 3x3 convolutions there took 47-51 ms
    instead of 82-86 ms as im2col + bmm, forward and backward (16 models x 16 images, one thread), and its
    gradient (W5's shape) 0.95-1.0 s instead of 1.03-1.09 s. Same sums without the padding's zero terms. (The
    stride-2 convolution of 2x2 maps to 1x1, four taps, was slower this way: 58 ms against 45 ms.) The product is
    ``k [P, O, C] @ x [P, C, B]``, so the weight's gradient comes out of its matmul in the weight's own layout
    (``x @ k^T`` gave it transposed: a [P, C, O] copy per convolution, 22 ms of W5's gradient each)."""
    B, O, C = h.shape[0], m.out_channels, m.in_channels
    k = take(0, _Tap(tap, m.weight[0, 0].numel())).view(P, O, C)
    x = h.reshape(B, P, C).permute(1, 2, 0)  # [P, C, B]
    y = torch.bmm(k, x) if m.bias is None else torch.baddbmm(take(1)[:, :, None], k, x)  # [P, O, B]
    return y.permute(2, 0, 1).reshape(B, P * O, 1, 1)


def _group_norm(m: nn.GroupNorm, take, h, form, P):
    h = _to_grouped(h, form, P)
    return F.group_norm(h, P * m.num_groups, take(0).reshape(-1), take(1).reshape(-1), m.eps), "grouped"


def _linear(m: nn.Linear, take, h, form, P):
    w = take(0).view(P, m.out_features, m.in_features)
    if form == "grouped":
        h = _to_models(h, form, P)
    y = torch.matmul(h, w.transpose(1, 2))  # a shared [N, in] broadcasts over the models
    return (y if m.bias is None else y + take(1)[:, None]), "models"


def _max_pool(m: nn.MaxPool2d, take, h, form, P):
    lead = h.shape[:2] if form == "models" else None
    y = F.max_pool2d(h if lead is None else h.flatten(0, 1), m.kernel_size, m.stride, m.padding, m.dilation,
                     m.ceil_mode)
    return (y if lead is None else y.unflatten(0, lead)), form


def _avg_pool(m, take, h, form, P):
    return h.mean((-2, -1), keepdim=True), form


def _flatten(h, form, P, start=1):
    if form == "grouped":  # [B, P*C, H, W] -> [P, B, C*H*W]
        return h.reshape(h.shape[0], P, -1).transpose(0, 1), "models"
    return h.flatten(start + (form == "models")), form


def _flatten_module(m: nn.Flatten, take, h, form, P):
    return _flatten(h, form, P)


def _relu_module(m, take, h, form, P):
    return torch.relu(h), form


_MODULES = {nn.Conv2d: _conv, nn.Linear: _linear, nn.ReLU: _relu_module, nn.MaxPool2d: _max_pool,
            nn.AdaptiveAvgPool2d: _avg_pool, nn.Flatten: _flatten_module}


def _module_rule(m: nn.Module):
    """The grouped counterpart of a leaf module, or None."""
    if isinstance(m, nn.GroupNorm):  # stabkit's reshape-based GroupNorm included: same function
        return _group_norm if m.affine else None
    rule = _MODULES.get(type(m))
    if rule is _conv and not (m.padding_mode == "zeros" and isinstance(m.padding, tuple) and m.groups == 1):
        return None
    if rule is _max_pool and m.return_indices:
        return None
    if rule is _avg_pool and m.output_size not in (1, (1, 1)):
        return None
    if rule is _flatten_module and (m.start_dim, m.end_dim) != (1, -1):
        return None
    return rule


class _Tracer(torch.fx.Tracer):
    """Stops at every module with a grouped rule (GroupNorm subclasses included) and, as torch.fx does, at
    torch's own modules (one without a rule, e.g. ``nn.LSTM``, makes the model unsupported)."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return _module_rule(m) is not None or super().is_leaf_module(m, qualname)


_RELU = {torch.relu, F.relu}
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
        return _to_models(out, form, P)

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


def _relu_call(env, args, P):
    h, form = env[args[0].name]
    return torch.relu(h), form


def _flatten_call(env, args, P):
    h, form = env[args[0].name]
    return _flatten(h, form, P)


def _add_call(env, args, P):
    """A residual add; operands in different forms meet in the grouped (4-d) or models form."""
    (a, fa), (b, fb) = env[args[0].name], env[args[1].name]
    if fa != fb:
        a, b = (_to_grouped(t, f, P) if t.dim() == 4 + (f == "models") else _to_models(t, f, P)
                for t, f in ((a, fa), (b, fb)))
        fa = "grouped" if a.dim() == 4 else "models"
    return a + b, fa


def _call_rule(op: str, target, args: tuple, kwargs: dict):
    """The grouped counterpart ``rule(env, args, P)`` of a traced function or method call, or None."""
    tensors = [a for a in args if isinstance(a, torch.fx.Node)]
    if kwargs:
        return None
    if op == "call_method":
        target = {"relu": torch.relu, "flatten": torch.flatten}.get(target)
    if target in _RELU and len(args) == 1 and tensors:
        return _relu_call
    if target is torch.flatten and len(tensors) == 1 and tuple(args[1:]) in ((), (1,)):
        return _flatten_call
    if target in _ADD and len(args) == 2 and len(tensors) == 2:
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

