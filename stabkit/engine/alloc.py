"""Allocator policy: freed tensor memory stays in the process for the next local step to reuse.

Every local step allocates fresh ``[P, d]`` tensors (client models, gradients, activations). glibc serves
blocks above its mmap threshold with fresh ``mmap``s and unmaps them when they are freed, so each step pays
page faults on tens of MB again (W2's LeNet-5 round: a 22 MB pooling gradient was zero-filled at 3.5 GB/s,
a fault per 4 KB page). Raising the mmap threshold to its maximum (32 MiB on 64-bit) and the trim
threshold lets freed blocks be reused: a W2 round at 8 pairs took 708-742 ms with the policy and 729-851 ms
without (three alternating runs each, 2 cores).

Blocks of 32 MiB and more are fresh mmaps whatever the threshold. A ResNet-18-GN round (W5) works on
``[16, 11.2 M]`` tensors of 715 MB; the machine policy sets torch's ``THP_MEM_ALLOC_ENABLE=1`` (unless set),
so such blocks come in transparent huge pages, 512 times fewer faults (W5 engine round, one thread: 3.1-3.3 s
without, 2.1-2.2 s with). They still had to be faulted in afresh every round, and on virtual machines that
report free memory to their host (virtio-balloon free page reporting, stabkit's CI machines) from the host:
one 715 MB addition took 0.9-1.1 s into such memory and 0.24 s into memory just freed. So the policy also
turns glibc's mmap off for the run (``M_MMAP_MAX = 0``): every block comes from glibc's heap, and a trim
threshold of ``STABKIT_HEAP_KEEP_MB`` (default a quarter of the machine's memory; from 2 GiB on, mallopt's
largest, no trimming) keeps that much freed memory for the next allocation; :func:`release` hands every free page back (``malloc_trim(0)``) when a run's
rounds end (a sweep's next job, or another process, may need the memory). This replaced a caching allocator
in C++ compiled at run time: measured on W5 and a 245-pair digits top-up job against it, jemalloc and
tcmalloc (``benchmarks/allocator.py``, ``docs/performance-engine.md``), glibc's own knobs were as fast.

Linux/glibc only, applied once per process by the machine policy's entry points (:mod:`stabkit.engine.machine`):
the start of the ``stabkit`` command and of sweep workers (a Python program may call
``stabkit.engine.machine.apply()`` before importing torch; building or running a run applies nothing); where the
user set ``MALLOC_*`` variables or preloads another allocator (``LD_PRELOAD``), their choice stands. :func:`policy` says in one line which
allocator the process uses (printed by ``stabkit pair``, recorded in ``config.json``).
"""
from __future__ import annotations

import ctypes
import os
import sys
from typing import Optional

from stabkit.errors import ConfigError

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX = -1, -3, -4  # glibc's mallopt parameter numbers
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's largest mmap threshold on 64-bit: larger blocks are always fresh mmaps
INT_MAX = (1 << 31) - 1
LIMIT_ENV = "STABKIT_HEAP_KEEP_MB"
OLD_ENV = "STABKIT_CPU_CACHE_MB"  # its name until the trim threshold was renamed; read for one more release
_policy: Optional[str] = None  # the line describing the allocator, once the policy is applied
_heap_only = False  # glibc's mmap is off in this process (release() trims)


def limit_bytes() -> int:
    """Freed memory kept for reuse, from ``STABKIT_HEAP_KEEP_MB`` (its old name ``STABKIT_CPU_CACHE_MB`` still
    read for one release) (a whole number of MiB), else a quarter of
    the machine's memory; 0 keeps glibc's mmap for large blocks."""
    name = _env_name()
    raw = os.environ.get(name, "").strip()
    if raw:
        if not (raw.isascii() and raw.isdigit()):
            raise ConfigError(f"invalid {name} {raw!r}: a whole number of MiB (0 turns the reuse of large "
                              "blocks off)")
        return int(raw) << 20
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def apply_at_start() -> None:
    """Apply the policy at a process's start, before torch is imported (the ``stabkit`` command, sweep
    workers): applied after torch's import, glibc's heap took two or three W5 rounds more to settle in 6 of 10
    processes (peak RSS 4.7 GB instead of 4.05), applied at the start in none of 7 (``docs/performance-engine.md``). A bad limit is left for the
    run's checks to report."""
    try:
        policy()
    except ConfigError:
        pass


def keep_freed_memory() -> bool:
    """Apply the policy (idempotent); True if glibc took stabkit's settings in this call or an earlier one."""
    policy()
    return _policy.startswith("allocator: glibc, ")


def policy() -> str:
    """Apply the policy once per process; the one line saying which allocator this process uses."""
    global _policy
    if _policy is None:
        _policy = _apply(limit_bytes())
    return _policy


def _apply(limit: int) -> str:
    global _heap_only
    preload = os.environ.get("LD_PRELOAD", "")
    if not sys.platform.startswith("linux"):
        return "allocator: the system's (stabkit's policy is for Linux's glibc)"
    if "malloc" in preload:
        return f"allocator: {preload} (LD_PRELOAD); stabkit's glibc policy not applied"
    if any(k.startswith("MALLOC_") for k in os.environ):
        return "allocator: glibc as the MALLOC_* variables set it; stabkit's policy not applied"
    libc = _libc()
    # mallopt takes an int: a limit beyond INT_MAX is no trimming at all (-1) until release()
    trim = 1 << 30 if limit == 0 else limit if limit < INT_MAX else -1
    if libc is None or not (libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) and libc.mallopt(M_TRIM_THRESHOLD, trim)):
        return "allocator: the system's (no glibc to take stabkit's policy)"
    if limit == 0:
        return f"allocator: glibc, blocks of 32 MiB and more mmapped afresh ({_env_label()}=0)"
    _heap_only = bool(libc.mallopt(M_MMAP_MAX, 0))
    return (f"allocator: glibc, every block from its heap, up to {limit >> 20:,} MiB of freed memory kept for reuse "
            f"({_env_label()})")


def _env_name() -> str:
    """The variable that sets the limit: ``STABKIT_HEAP_KEEP_MB``, or its old name where only that is set."""
    return OLD_ENV if OLD_ENV in os.environ and LIMIT_ENV not in os.environ else LIMIT_ENV


def _env_label() -> str:
    """The variable's name as the policy line gives it (the old name says it was renamed)."""
    return LIMIT_ENV if _env_name() == LIMIT_ENV else f"{OLD_ENV}, renamed {LIMIT_ENV}"


def keeps_freed_blocks() -> bool:
    """Whether this process keeps freed blocks of every size for reuse (glibc's mmap off)."""
    return _heap_only


def release() -> None:
    """Give the heap's free memory back to the system (``malloc_trim(0)``) where the policy keeps it."""
    if _heap_only:
        _libc().malloc_trim(0)


def _libc():
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None
