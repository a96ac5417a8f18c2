"""CUDA-graph replay of the batched minibatch gradient: one launch instead of hundreds per local step.

On a GPU a small model's local step is launch-bound: cuDNN runs a grouped convolution over P client models as
one kernel per group, so LeNet-5's gradient of 160 clients issues thousands of launches per step, and the GPU
sat idle for 45% of W2's round on an H100 (``benchmarks/gpu_probe.py``). A CUDA graph records those launches
once and replays them as one: the same kernels with the same arguments, so the gradient is bitwise the one
the eager call gives (checked in ``tests/engine/test_cuda.py``), 2.7x faster for W2's gradient.

A graph has static inputs and outputs: each call copies its arguments into the captured input buffers,
replays, and returns a copy of the output (an algorithm may keep the gradient in its state past the next
step). One graph per distinct argument shape, in one shared memory pool, at most ``MAX_GRAPHS`` of them;
further shapes run eagerly. ``STABKIT_CUDA_GRAPHS=0`` turns replay off (every call eager).
"""
from __future__ import annotations

import os
from typing import Callable

import torch

MAX_GRAPHS = 4  # distinct argument shapes captured per function (a run uses one or two)
WARMUP_CALLS = 2  # eager calls on a side stream before capture (cuDNN/cuBLAS workspaces, lazy init)


def graphs_enabled(device: torch.device) -> bool:
    """Graph replay is on for CUDA devices unless ``STABKIT_CUDA_GRAPHS=0``."""
    return device.type == "cuda" and os.environ.get("STABKIT_CUDA_GRAPHS", "1") != "0"


class GraphedCall:
    """``fn(*tensors) -> tensor`` replayed from a CUDA graph captured per argument shape."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.graphs: dict = {}  # (shape, dtype) of every argument -> (graph, static inputs, static output)
        self.pool = None

    def __call__(self, *args: torch.Tensor) -> torch.Tensor:
        key = tuple((a.shape, a.dtype) for a in args)
        entry = self.graphs.get(key)
        if entry is None:
            if len(self.graphs) >= MAX_GRAPHS:
                return self.fn(*args)
            entry = self.graphs[key] = self._capture(args)
        graph, inputs, output = entry
        for static, value in zip(inputs, args):
            static.copy_(value)
        graph.replay()
        return output.clone()

    def _capture(self, args: tuple) -> tuple:
        inputs = tuple(a.clone() for a in args)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                self.fn(*inputs)
        torch.cuda.current_stream().wait_stream(side)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            output = self.fn(*inputs)
        return graph, inputs, output
