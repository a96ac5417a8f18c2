"""The layer protocol (``stabkit.engine.layers``): an elementwise layer added from this file as one entry runs
on both fast paths, the hand-written Sequential path and the traced grouped model, with the gradients,
evaluations and Hessian-vector products of ``torch.func``; without its entry the model keeps the generic path."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from stabkit.engine import layers
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.grouped import GroupedModel, compile_grouped
from stabkit.engine.layers import Elementwise
from stabkit.engine.seqgrad import SeqGrad, compile_seq

# tanh keeps its output for the backward (1 - y^2), SiLU its input (s + h s (1 - s), s = sigmoid(h))
ENTRIES = {
    nn.Tanh: Elementwise(torch.tanh, lambda dh, y: dh * (1 - y * y), functions=(torch.tanh,), methods=("tanh",)),
    nn.SiLU: Elementwise(F.silu, lambda dh, h: dh * torch.sigmoid(h) * (1 + h * (1 - torch.sigmoid(h))),
                         keep="input", functions=(F.silu,)),
}
CPU = torch.device("cpu")


def seq_net(act):
    return nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), act(), nn.Flatten(), nn.Linear(48, 5), act(),
                         nn.Linear(5, 4))


class TracedNet(nn.Module):
    """Not a Sequential: the new layer as a module and as a function (or method) call."""

    def __init__(self, act):
        super().__init__()
        self.conv, self.act, self.head = nn.Conv2d(2, 3, 3, padding=1), act(), nn.Linear(48, 4)
        self.call = (lambda h: h.tanh()) if act is nn.Tanh else F.silu

    def forward(self, x):
        return self.head(torch.flatten(self.call(self.act(self.conv(x))), 1))


def _model(make, act, dtype=torch.float64):
    torch.manual_seed(0)
    return FlatModel(make(act), "classification", dtype, CPU)


@pytest.mark.parametrize("act", list(ENTRIES))
def test_without_its_entry_a_layer_keeps_the_generic_path(act):
    assert compile_seq(seq_net(act), "classification") is None
    assert compile_grouped(TracedNet(act), "classification") is None


@pytest.mark.parametrize("act", list(ENTRIES))
@pytest.mark.parametrize("make,path", [(seq_net, SeqGrad), (TracedNet, GroupedModel)])
def test_an_elementwise_entry_runs_on_both_paths_as_torch_func(monkeypatch, act, make, path):
    monkeypatch.setitem(layers.KINDS, act, ENTRIES[act])
    m = _model(make, act)
    assert isinstance(m.fast, path)
    P, B = 3, 5
    th = m.flatten() + 0.1 * torch.randn(P, m.d, dtype=torch.float64)
    x, y = torch.randn(P, B, 2, 4, 4, dtype=torch.float64), torch.randint(0, 4, (P, B))
    ws = torch.rand(P, B, dtype=torch.float64)
    fast = [m.grads(th, x, y), *m.evaluate(th, x[0], y[0], ws)[:2], m.losses(th, x[0], y[0])[0]]
    m.fast = None
    ref = [m.grads(th, x, y), *m.evaluate(th, x[0], y[0], ws)[:2], m.losses(th, x[0], y[0])[0]]
    for a, b in zip(fast, ref):
        assert a.shape == b.shape and a.abs().max() > 0
        assert (a - b).abs().max() <= 1e-12 * max(1.0, float(b.abs().max()))


@pytest.mark.parametrize("act", list(ENTRIES))
def test_the_grouped_hessian_vector_product_of_an_added_layer_is_torch_funcs(monkeypatch, act):
    monkeypatch.setitem(layers.KINDS, act, ENTRIES[act])
    m = _model(TracedNet, act)
    th, v = m.flatten()[None], torch.randn(1, m.d, dtype=torch.float64)
    x, y = torch.randn(6, 2, 4, 4, dtype=torch.float64), torch.randint(0, 4, (6,))
    w = torch.rand(6, dtype=torch.float64)
    w /= w.sum()  # FlatModel.hvp differentiates the w-weighted mean, the grouped one the w-weighted sum
    grouped = m.fast.hvp(th, v, x, y, w[None])[0]
    ref = m.hvp(th[0], v[0], x, y, w)
    assert grouped.abs().max() > 0 and (grouped - ref).abs().max() <= 1e-12 * max(1.0, float(ref.abs().max()))


def test_an_added_layer_counts_no_flops_of_its_own(monkeypatch):
    """The Sequential path's FLOP count (products and convolutions) equals torch's flop counter's."""
    monkeypatch.setitem(layers.KINDS, nn.Tanh, ENTRIES[nn.Tanh])
    m = _model(seq_net, nn.Tanh, torch.float32)
    x1, y1 = torch.randn(1, 2, 4, 4), torch.zeros(1, dtype=torch.long)
    counted = m.flops_per_sample(x1, y1)
    m._flops, m.fast = None, None
    assert counted == m.flops_per_sample(x1, y1) > 0
