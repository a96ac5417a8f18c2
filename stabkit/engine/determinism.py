"""Deterministic kernels for the span of a computation that a run's metrics come from.

``torch.use_deterministic_algorithms(True)`` makes cuDNN choose deterministic convolution algorithms and
``index_add_``/``scatter_add_`` on CUDA sort instead of adding atomically; without it two identical GPU runs
differed in the 7th digit of their round-0 ``r_u`` and ``grad_norm_sq`` (an H100, ``tests/engine/test_cuda.py``),
because round 0 was evaluated before the round loop switched the mode on. Every entry point that computes
logged numbers (``PairedRun.run`` and ``resume`` as a whole, ``PairedRun.step`` for callers stepping a run
themselves, replays) runs inside :func:`deterministic`; the mode
is put back as it was afterwards, so a caller's own setting is left alone.

Under the mode torch also fills every freshly allocated tensor with NaN (``torch.utils.deterministic.
fill_uninitialized_memory``), so that reading memory no op has written gives a fixed value. Every op stabkit
calls writes its whole output (the tests' identical-metrics checks would see any read of stale memory), and
the fill was a pass over every new tensor: 422 fills, 14% of a ResNet-18-GN round (W5), 4% of W1's. It is
turned off for the block and put back after.

TF32 is off for the block too, for matmuls and cuDNN convolutions alike (restored after): a float32 run
computes in float32 (cuDNN's TF32 default would round conv inputs to 10 mantissa bits, far above the
discrepancies a sample perturbation starts with). The flags only act on CUDA.

The flag is set where torch keeps it (``torch._C._set_deterministic_algorithms``, what the public call does)
unless inductor's configuration is already loaded: ``torch.use_deterministic_algorithms`` also copies it into
``torch._inductor.config``, and importing that imports ``torch._dynamo`` — 1.9 s of every run's start-up,
for a compiler stabkit does not use (a caller who has loaded it gets the public call, both flags set).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager

import torch
import torch.utils.deterministic


@contextmanager
def deterministic():
    """Deterministic algorithms on, the fill of fresh tensors off and TF32 off, for the block (restores the
    previous mode, its warn-only flag, the fill flag and both TF32 flags)."""
    previous = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    set_deterministic()
    try:
        yield
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = fill
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
        _set_mode(previous, warn_only)


def set_deterministic() -> None:
    """What :func:`deterministic` sets, for the rest of the process (the benchmarks time the engine as runs
    compute)."""
    _set_mode(True, False)
    torch.utils.deterministic.fill_uninitialized_memory = False
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False


def _set_mode(mode: bool, warn_only: bool):
    if "torch._inductor.config" in sys.modules:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
    else:
        torch._C._set_deterministic_algorithms(mode, warn_only=warn_only)
