"""Deterministic kernels for the span of a computation that a run's metrics come from.

``torch.use_deterministic_algorithms(True)`` makes cuDNN choose deterministic convolution algorithms and
``index_add_``/``scatter_add_`` on CUDA sort instead of adding atomically; without it two identical GPU runs
differed in the 7th digit of their round-0 ``r_u`` and ``grad_norm_sq`` (an H100, ``tests/test_cuda.py``),
because round 0 was evaluated before the round loop switched the mode on. Every entry point that computes
logged numbers (``PairedRun.run`` and ``resume`` as a whole, ``PairedRun.step`` for callers stepping a run
themselves, replays) runs inside :func:`deterministic`; the mode
is put back as it was afterwards, so a caller's own setting is left alone.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def deterministic():
    """Deterministic algorithms on for the block (restores the previous mode and its warn-only flag)."""
    previous = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous, warn_only=warn_only)
