"""The Shakespeare next-character model: Embedding(80, 8), a 2-layer LSTM of 100 units, Linear(100, 80) on the
last time step (the FedDyn / FedSAGD reference code).

The LSTM is a hand-written cell loop with ``torch.nn.LSTM``'s parameter names, shapes, gate order (i, f, g, o)
and initialisation, so parameter counts, state dicts and outputs match ``nn.LSTM`` (a test checks this).
Why not ``nn.LSTM`` itself: under ``torch.func.vmap`` its fused kernel has no batching rule and falls back to a
slow per-sample loop with a warning; the cell loop is plain matmuls that vmap batches over clients and pairs.
"""
from __future__ import annotations

import math

import torch
from torch import nn

VOCAB, EMBED, HIDDEN, LAYERS = 80, 8, 100, 2


class CellLoopLSTM(nn.Module):
    """A batch-first multi-layer LSTM returning the top layer's outputs ``[B, T, hidden]``."""

    def __init__(self, input_size: int, hidden: int, layers: int):
        super().__init__()
        self.hidden, self.layers = hidden, layers
        bound = 1.0 / math.sqrt(hidden)
        for k in range(layers):
            size = input_size if k == 0 else hidden
            for name, shape in ((f"weight_ih_l{k}", (4 * hidden, size)), (f"weight_hh_l{k}", (4 * hidden, hidden)),
                                (f"bias_ih_l{k}", (4 * hidden,)), (f"bias_hh_l{k}", (4 * hidden,))):
                self.register_parameter(name, nn.Parameter(torch.empty(shape).uniform_(-bound, bound)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for k in range(self.layers):
            w_ih, w_hh = getattr(self, f"weight_ih_l{k}"), getattr(self, f"weight_hh_l{k}")
            bias = getattr(self, f"bias_ih_l{k}") + getattr(self, f"bias_hh_l{k}")
            pre = x @ w_ih.T + bias  # input contributions of all time steps at once
            h = c = pre.new_zeros(x.shape[0], self.hidden)
            outs = []
            # unbind, not pre[:, t]: each indexing's backward fills a zero tensor of pre's whole size and adds
            # its slice (T full-size passes per layer: 81% of a batched gradient's time); unbind's backward
            # stacks the T slices once. The same gradient, bit for bit.
            for pre_t in pre.unbind(1):
                i, f, g, o = (pre_t + h @ w_hh.T).chunk(4, dim=-1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                h = torch.sigmoid(o) * torch.tanh(c)
                outs.append(h)
            x = torch.stack(outs, dim=1)
        return x


class CharLSTM(nn.Module):
    """Token ids ``[B, T]`` -> logits ``[B, classes]`` of the character after the sequence."""

    def __init__(self, vocab: int = VOCAB, classes: int = VOCAB):
        super().__init__()
        self.embedding = nn.Embedding(vocab, EMBED)
        self.lstm = CellLoopLSTM(EMBED, HIDDEN, LAYERS)
        self.fc = nn.Linear(HIDDEN, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.lstm(self.embedding(x))[:, -1])
