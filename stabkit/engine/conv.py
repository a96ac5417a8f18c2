"""The ``nn.Conv2d`` layer kind of the fast paths (``stabkit.engine.layers``): groups=1, zero padding.

Sequential path (:class:`SeqConv2d`): every model's channels side by side, one grouped convolution forward
(or, on input shared by all models, one convolution with every model's filters stacked) and one
``convolution_backward`` call for the weight and input gradients.

Grouped model (:func:`grouped_conv`): the same grouped convolution with the filters taken as one leaf in the
convolution's memory format (:class:`ConvWeight`), and on the smallest maps one batched matmul over the
models instead: im2col on maps of at most ``SMALL_MAP`` output positions (:func:`_conv_bmm`), the centre tap
alone on 1x1 maps (:func:`_conv_point`, parameters entering as :class:`Tap`). Autograd gives the backward.
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from stabkit.engine import forms

# Output positions at or below which a per-model convolution runs as im2col + one bmm over the models, per
# device type: on the CPU oneDNN's grouped kernels win above 2x2 maps; on an H100 cuDNN's grouped kernels
# spend a third of ResNet-18-GN's step in layout transposes, and im2col + bmm up to 16x16 maps made its
# gradient 1.26x faster (40 models x B = 50: 58.1 -> 46.0 ms; 4x4 47.9, 8x8 46.9, 32x32 47.1;
# benchmarks/gpu_probe.py --small-map)
SMALL_MAP = {"cpu": 4, "cuda": 256}


def supported(m: nn.Conv2d) -> bool:
    return m.padding_mode == "zeros" and isinstance(m.padding, tuple) and m.groups == 1


class SeqConv2d:
    """The Sequential path's convolution: one grouped convolution over all P models' channel blocks."""

    takes_input = True  # may be a Sequential's first layer

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
        fmt = forms.conv_format(h.device)
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


class ConvWeight:
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


class Tap:
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


def grouped_conv(m: nn.Conv2d, take, h, form, P):
    """The grouped model's convolution (see the module docstring); ``take(j, layout)`` its j-th parameter."""
    if form != "shared":
        h = forms.to_grouped(h, form, P)
        tap = _centre_tap(m, h)
        if tap is not None:
            return _conv_point(m, take, h, P, tap), "grouped"
        if math.prod(_out_size(m, h)) <= SMALL_MAP.get(h.device.type, 4):
            return _conv_bmm(m, take, h, P), "grouped"
    fmt = forms.conv_format(h.device)
    w = take(0, ConvWeight(m, fmt))
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
    the tap that sees the input (:class:`Tap`): ResNet-18-GN's 512-channel 3x3 convolutions there took 47-51 ms
    instead of 82-86 ms as im2col + bmm, forward and backward (16 models x 16 images, one thread), and its
    gradient (W5's shape) 0.95-1.0 s instead of 1.03-1.09 s. Same sums without the padding's zero terms. (The
    stride-2 convolution of 2x2 maps to 1x1, four taps, was slower this way: 58 ms against 45 ms.) The product is
    ``k [P, O, C] @ x [P, C, B]``, so the weight's gradient comes out of its matmul in the weight's own layout
    (``x @ k^T`` gave it transposed: a [P, C, O] copy per convolution, 22 ms of W5's gradient each)."""
    B, O, C = h.shape[0], m.out_channels, m.in_channels
    k = take(0, Tap(tap, m.weight[0, 0].numel())).view(P, O, C)
    x = h.reshape(B, P, C).permute(1, 2, 0)  # [P, C, B]
    y = torch.bmm(k, x) if m.bias is None else torch.baddbmm(take(1)[:, :, None], k, x)  # [P, O, B]
    return y.permute(2, 0, 1).reshape(B, P * O, 1, 1)
