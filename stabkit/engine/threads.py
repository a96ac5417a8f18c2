"""Thread policy for the engine's tensor ops: one intra-op thread for tiny ops.

The batched ops of tiny models (W1's logistic regression: under 4 MFLOP per local step even with 16
trajectories) finish in microseconds; splitting them across OpenMP threads costs more in synchronisation
than it saves, and a spinning thread that loses its core stalls every op (on 2 shared cores an index
gather took 50 us with one thread and 2-8 ms with two while other processes ran). Work above
``SMALL_OP_FLOPS`` per call keeps torch's configured thread count: on 2 idle cores two threads made the
default digits round (8 pairs, 0.26 GFLOP per step) 18.3 -> 13.8 ms, its 16-model evaluation 17 -> 8.7 ms
and a LeNet-5 gradient of 20 clients (0.3 GFLOP) 15.6 -> 8.8 ms. Sweeps run each job with one thread
(``stabkit.sweep.job``). The setting is scoped: it is restored when the block ends.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

SMALL_OP_FLOPS = 1e7  # FLOPs per call below which one thread is used


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
