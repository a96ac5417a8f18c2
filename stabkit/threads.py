"""Thread policy for the engine's tensor ops: one intra-op thread for small ops.

The batched ops of small models (a few MFLOP per local step) finish in tens of microseconds; splitting
them across OpenMP threads costs more in synchronisation than it saves, and on a loaded machine a
spinning thread that loses its core stalls every op (measured on 2 cores: an index gather took 50 us
with one thread and 2-8 ms with two while other processes ran; evaluating 16 MLPs on all digits took
0.13 s with one thread and 0.4 s with two). Only conv-net-sized work (above ``SMALL_OP_FLOPS`` per call)
keeps torch's configured thread count. The setting is scoped: it is restored when the block ends.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

SMALL_OP_FLOPS = 1e10  # below this many FLOPs per batched call one thread was faster (2 shared cores)


@contextmanager
def threads_for(flops: float):
    """Run the block with 1 thread if ``flops`` (work of its typical op batch) is small, else unchanged."""
    before = torch.get_num_threads()
    if flops < SMALL_OP_FLOPS and before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
