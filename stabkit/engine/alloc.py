"""Allocator policy: freed tensor memory stays in the process for the next local step to reuse.

Every local step allocates fresh ``[P, d]`` tensors (client models, gradients, activations). glibc serves
blocks above its mmap threshold with fresh ``mmap``s and unmaps them when they are freed, so each step pays
page faults on tens of MB again (W2's LeNet-5 round: a 22 MB pooling gradient was zero-filled at 3.5 GB/s,
a fault per 4 KB page). Raising the mmap threshold to its maximum (32 MiB on 64-bit) and the trim
threshold to 1 GiB lets freed blocks be reused: a W2 round at 8 pairs took 708-742 ms with the policy
and 729-851 ms without (three alternating runs each, 2 cores). Linux/glibc only, applied once per process by the engine; where the user
set ``MALLOC_*`` variables, their choice stands.

Blocks of 32 MiB and more are always fresh mmaps, whatever the threshold. They were faulted in 4 KB at a
time: a ResNet-18-GN round (W5) works on ``[16, 11.2 M]`` tensors of 715 MB, and every element-wise pass over
a fresh one (the local step, the clients' differences, their mean) ran at ~2 GB/s. ``import stabkit``
therefore sets torch's ``THP_MEM_ALLOC_ENABLE=1`` (unless set): torch then asks for transparent huge pages
(``madvise``) for its allocations of 2 MB and more, 512 times fewer faults. W5 engine round, one thread,
alternating processes: 3.1-3.3 s without, 2.1-2.2 s with; W1-W4's tensors stay below 2 MB or within a chunk
(same numbers, bit for bit: only where memory lies changes). torch reads the variable at its first allocation
of 2 MB or more, so it applies wherever stabkit is imported before such a tensor exists (the ``stabkit``
command, scripts that import torch and then stabkit, sweep workers, which also inherit it). Huge pages still
had to be faulted in (on these VMs, often from the host) for every such block: the policy's last part hands
blocks of 32 MiB and more to stabkit's caching CPU allocator (:mod:`stabkit.engine.cpucache`), which keeps
them for the next allocation of the same size.
"""
from __future__ import annotations

import ctypes
import os
import sys

from stabkit.engine import cpucache

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's largest mmap threshold on 64-bit: larger blocks are always fresh mmaps
_applied = False


def keep_freed_memory() -> bool:
    """Apply the policy (idempotent): the caching allocator for large blocks where it can be installed, and
    glibc's thresholds; True if glibc accepted them in this call or an earlier one."""
    global _applied
    cpucache.install()
    if _applied:
        return True
    if not sys.platform.startswith("linux") or any(k.startswith("MALLOC_") for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    _applied = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    return _applied
