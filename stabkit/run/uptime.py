"""How long this process has run, start-up included: the ``time:`` line of ``stabkit pair`` covers the whole
process (the interpreter's start, the imports, building the task and engine), not only the rounds.

On Linux the start is the kernel's record of it (``/proc/self/stat``'s start time, in clock ticks since boot,
against ``/proc/uptime``: 10 ms resolution); elsewhere the first import of this module, which the command
line does before anything slow."""
from __future__ import annotations

import os
import time

_IMPORTED = time.monotonic()


def _since_start_linux() -> float:
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()  # the name (field 2) may hold spaces; fields from 3 on
    start_ticks = int(fields[19])  # field 22: starttime
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))


def process_seconds() -> float:
    """Seconds since this process started (since this module's import where the start is not known)."""
    try:
        return _since_start_linux()
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - _IMPORTED
