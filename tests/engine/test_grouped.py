"""The traced grouped model (stabkit.engine.grouped) against torch.func: ResNet-18-GN's graph (narrow and on
small images, so the check is quick), a user model with a residual add, Hessian-vector products against a
dense Hessian, and the architectures that must keep the generic path."""
import pytest
import torch
from torch import nn

import stabkit.engine.conv
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.grouped import GroupedModel, compile_grouped
from stabkit.flatness.objective import Objective
from stabkit.models.lstm import CharLSTM
from stabkit.models.resnet import ResNet18GN
from tests.helpers import assert_equal_to_rounding, fast_path_outputs


class Residual(nn.Module):
    """A plug-in model: conv, torch GroupNorm, an identity shortcut added to a branch, method calls."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.norm = nn.GroupNorm(2, 4)
        self.branch = nn.Sequential(nn.Conv2d(4, 4, 1), nn.ReLU())
        self.head = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        h = self.norm(self.conv(x)).relu()
        h = h + self.branch(h)
        return self.head(h.flatten(1))


class OnePixel(nn.Module):
    """3x3 convolutions (padding 1, with and without bias) on 1x1 maps: the centre-tap path."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(), nn.Conv2d(3, 4, 3, padding=1, bias=False))
        self.head = nn.Linear(4, 3)

    def forward(self, x):
        return self.head(torch.flatten(self.body(x), 1))


class Twice(nn.Module):
    """One convolution called twice (its gradient is the sum of both uses) and a layer never called (zeros)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.unused = nn.Linear(3, 3)
        self.head = nn.Linear(2 * 3 * 3, 3)

    def forward(self, x):
        return self.head(torch.flatten(self.conv(self.conv(x).relu()), 1))


MODELS = {"residual": (Residual, (2, 4, 4)), "one_pixel": (OnePixel, (2, 1, 1)), "twice": (Twice, (2, 3, 3))}



@pytest.mark.parametrize("name", ["resnet18_gn", "residual", "residual_bmm", "one_pixel", "twice"])
def test_grouped_model_equals_torch_func_in_float64(name, monkeypatch):
    if name == "residual_bmm":  # every convolution (biases included) as im2col + bmm
        monkeypatch.setitem(stabkit.engine.conv.SMALL_MAP, "cpu", 10 ** 9)
    torch.manual_seed(0)
    if name == "resnet18_gn":  # on 8x8 images its last three stages run on 1x1 maps (the centre-tap path)
        module, shape = ResNet18GN(3, 5, widths=(4, 6, 8, 8)), (3, 8, 8)
    else:
        make, shape = MODELS[name.removesuffix("_bmm")]
        module = make()
    m = FlatModel(module, "classification", torch.float64, torch.device("cpu"))
    assert isinstance(m.fast, GroupedModel)
    P, B = 3, 4
    th = m.flatten() + 0.1 * torch.randn(P, m.d, dtype=torch.float64)
    x = torch.randn(P, B, *shape, dtype=torch.float64)
    y = torch.randint(0, m.module(x[0]).shape[-1], (P, B))
    w, ws = (torch.rand(P, B) > 0.3).to(torch.float64), torch.rand(P, B, dtype=torch.float64)
    fast, fast_exact = fast_path_outputs(m, th, x, y, w, ws)
    m.fast = None
    ref, ref_exact = fast_path_outputs(m, th, x, y, w, ws)
    for a, b in zip(fast, ref):
        assert a.shape == b.shape and a.abs().max() > 0
        assert (a - b).abs().max() <= 1e-12 * max(1.0, float(b.abs().max()))
    for a, b in zip(fast_exact, ref_exact):
        assert torch.equal(a, b)


@pytest.mark.parametrize("name", ["resnet18_gn", "one_pixel"])
def test_models_sharing_their_parameters_give_the_gradients_of_their_copies(name):
    """theta ``[Q, s, d]`` broadcast over s (a round's first local step: every client at x_t) gives the
    gradients of the s copies written out ``[Q * s, d]``, to rounding: the two layouts reach the convolutions
    in different strides, and oneDNN may pick another kernel for each (on AVX-512 it does, ~8 eps apart)."""
    torch.manual_seed(2)
    module, shape = (ResNet18GN(3, 5, widths=(4, 6, 8, 8)), (3, 8, 8)) if name == "resnet18_gn" else \
        (OnePixel(), (2, 1, 1))
    m = FlatModel(module, "classification", torch.float32, torch.device("cpu"))
    Q, s, B = 2, 3, 4
    shared = (m.flatten() + 0.1 * torch.randn(Q, m.d))[:, None].expand(Q, s, m.d)
    x, y = torch.randn(Q * s, B, *shape), torch.randint(0, 3, (Q * s, B))
    g = m.grads(shared, x, y)
    assert g.shape == (Q * s, m.d) and g[0].abs().max() > 0 and not torch.equal(g[0], g[1])
    assert_equal_to_rounding(g, m.grads(shared.reshape(Q * s, m.d), x, y))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_grouped_hvp_equals_the_dense_hessian(name):
    torch.manual_seed(1)
    make, shape = MODELS[name]
    m = FlatModel(make(), "classification", torch.float64, torch.device("cpu"))
    Q, N = 2, 7
    th = m.flatten() + 0.1 * torch.randn(Q, m.d, dtype=torch.float64)
    x, y, w = torch.randn(N, *shape, dtype=torch.float64), torch.randint(0, 3, (N,)), torch.rand(Q, N,
                                                                                                dtype=torch.float64)
    v = torch.randn(Q, m.d, dtype=torch.float64)
    got = m.fast.hvp(th, v, x, y, w)
    assert torch.equal(Objective(m, x, y, w).hvp(th, v), got)  # sharpness measures take this path
    for q in range(Q):
        f = lambda t: (m.per_sample_loss(m.forward(t, x), y) * w[q]).sum()  # noqa: E731
        H = torch.func.hessian(f)(th[q])
        assert (got[q] - H @ v[q]).abs().max() <= 1e-12 * max(1.0, float((H @ v[q]).abs().max()))


def test_convolutions_of_one_pixel_take_the_centre_tap(monkeypatch):
    """The paper ResNet's last stage at CIFAR size (1x1 maps) and the test model above take the centre-tap
    matmul; larger maps and the stride-2 convolution of 2x2 maps keep their paths."""
    taps = []
    centre = stabkit.engine.conv._centre_tap
    monkeypatch.setattr(stabkit.engine.conv, "_centre_tap", lambda m, h: taps.append(centre(m, h)) or taps[-1])
    P = 2
    for module, shape, expected in [(ResNet18GN(3, 4), (3, 32, 32), [None] * 16 + [4, None, 4, 4]),
                                    (OnePixel(), (2, 1, 1), [4, 4])]:
        taps.clear()
        m = FlatModel(module, "classification", torch.float32, torch.device("cpu"))
        m.grads(m.flatten().expand(P, -1).clone(), torch.randn(P, 3, *shape), torch.randint(0, 3, (P, 3)))
        assert taps == expected


def test_the_paper_resnet_takes_the_grouped_path_and_untraceable_models_do_not():
    assert compile_grouped(ResNet18GN(3, 10), "classification") is not None
    assert compile_grouped(CharLSTM(12, 12), "classification") is None  # nn.LSTM: no grouped rule
    assert compile_grouped(nn.Sequential(nn.Flatten(), nn.Linear(4, 2), nn.Tanh()), "classification") is None
    assert compile_grouped(nn.Sequential(nn.Conv2d(1, 2, 3, groups=1, padding="same")), "classification") is None
    assert compile_grouped(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)), "classification") is None
