"""Thread policy for the engine's tensor ops: one intra-op thread for tiny ops, and for large ops no more
threads than there are idle CPUs when the run starts.

The batched ops of tiny models (W1's logistic regression: under 4 MFLOP per local step even with 16
trajectories) finish in microseconds; splitting them across OpenMP threads costs more in synchronisation
than it saves, and a spinning thread that loses its core stalls every op (on 2 shared cores an index
gather took 50 us with one thread and 2-8 ms with two while other processes ran). Work above
``SMALL_OP_FLOPS`` per call gains from threads on idle cores: on 2 idle cores two threads made the default
digits round (8 pairs, 0.26 GFLOP per step) 18.3 -> 13.8 ms, its 16-model evaluation 17 -> 8.7 ms and a
LeNet-5 gradient of 20 clients (0.3 GFLOP) 15.6 -> 8.8 ms. On a busy machine the same threads lose: every
op waits at a barrier for the thread that was descheduled (two threads were 1.5-2.7x slower than one under
contention). So :func:`run_threads` measures the idle CPUs over ``IDLE_WINDOW_S`` when a run starts
(``/proc/stat``, the CPUs this process may use) and uses at most that many threads for large ops
(``benchmarks/threads.py`` measures the policy against one thread and torch's default, with and without
a competing load). The count is decided once per run and recorded in its ``config.json`` (``threads``):
results can depend on it in the last bits (reductions split across threads), and ``STABKIT_THREADS=N``
pins it to reproduce a run exactly. Sweeps run each job with one thread (``stabkit.sweep.job``). Every
setting is scoped: it is restored when the block ends.
"""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

SMALL_OP_FLOPS = 1e7  # FLOPs per call below which one thread is used
IDLE_WINDOW_S = 0.05  # how long the idle CPUs are measured at the start of a run
THREADS_ENV = "STABKIT_THREADS"


def _cpu_times(cpus: set) -> tuple[int, int]:
    """(idle, total) jiffies summed over ``cpus`` from ``/proc/stat``."""
    idle = total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            values = [int(v) for v in fields[:8]]  # user nice system idle iowait irq softirq steal
            idle += values[3] + values[4]
            total += sum(values)
    return idle, total


def usable_cpus() -> set:
    """The CPUs this process may run on."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def idle_cpus(window: float = IDLE_WINDOW_S) -> Optional[float]:
    """CPUs (of those this process may run on) that were idle over the next ``window`` seconds, or None
    where ``/proc/stat`` is not available."""
    cpus = usable_cpus()
    try:
        idle0, total0 = _cpu_times(cpus)
        time.sleep(window)
        idle1, total1 = _cpu_times(cpus)
    except (OSError, ValueError):
        return None
    if total1 <= total0:
        return None
    return len(cpus) * (idle1 - idle0) / (total1 - total0)


def run_threads(flops: float) -> int:
    """Intra-op threads for a run whose largest op batch is ``flops``: ``STABKIT_THREADS`` if set, else 1 for
    small work, else torch's thread count capped by the idle CPUs measured now (at least one)."""
    pinned = os.environ.get(THREADS_ENV, "").strip()
    if pinned.isascii() and pinned.isdigit() and int(pinned) >= 1:
        return int(pinned)
    import torch  # on use, here and in threads_for: usable_cpus sizes a command's workers before torch's import

    threads = torch.get_num_threads()
    if threads == 1 or flops < SMALL_OP_FLOPS:
        return 1
    idle = idle_cpus()
    return threads if idle is None else max(1, min(threads, int(idle + 0.5)))


@contextmanager
def threads_for(flops: float, large: Optional[int] = None):
    """Run the block with 1 thread if ``flops`` (work of its typical op batch) is small, else with ``large``
    threads (None: the policy's count now, :func:`run_threads`). Every phase takes its threads from here —
    the engine and evaluation (the run's count), the constants, flatness, a Flower app's clients — so none
    runs with torch's default of one thread per CPU on a machine whose CPUs are busy."""
    import torch

    before = torch.get_num_threads()
    want = 1 if flops < SMALL_OP_FLOPS else (large or run_threads(flops))
    if want != before:
        torch.set_num_threads(want)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
