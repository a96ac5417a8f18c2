"""The machine policy, in one room: every process-wide setting stabkit makes for a run's speed, applied by
entry points only — the ``stabkit`` command as it starts and sweep workers as they start (:func:`apply`) — and
by a library user who wants the same speed (``stabkit.engine.machine.apply()``, best before ``import torch``).
Importing stabkit, checking a configuration, building or running a run changes no environment variable and no
process-wide setting; what a run's numbers need is scoped to the run (:mod:`stabkit.engine.determinism` turns
deterministic kernels on and TF32 off for its span and restores them).

* ``THP_MEM_ALLOC_ENABLE=1`` (unless set): torch puts CPU tensors of 2 MB and more in transparent huge pages,
  512 times fewer page faults for a ResNet-18-GN round's 715 MB blocks (:mod:`stabkit.engine.alloc`);
* the allocator policy (:mod:`stabkit.engine.alloc`): glibc serves every block from its heap and keeps up to
  ``STABKIT_HEAP_KEEP_MB`` of freed memory for the next round;
* ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` (unless set): cuBLAS's deterministic workspace, without which
  deterministic mode refuses every CUDA matmul. cuBLAS reads it once, so it is set at the start of the process;
  a library user's CUDA run without it is refused in one line naming this function.
"""
from __future__ import annotations

import os

from stabkit.engine import alloc
from stabkit.errors import ConfigError

CUBLAS_ENV, CUBLAS_DETERMINISTIC = "CUBLAS_WORKSPACE_CONFIG", ":4096:8"


def apply() -> None:
    """Apply the machine policy to this process (idempotent; a value the user set stands). A bad
    ``STABKIT_HEAP_KEEP_MB`` is left for the run's checks to report in one line."""
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")
    os.environ.setdefault(CUBLAS_ENV, CUBLAS_DETERMINISTIC)
    alloc.apply_at_start()


def require_cuda_policy(device) -> None:
    """Refuse a CUDA run in a process whose cuBLAS workspace is not the deterministic one (a library user who
    did not call :func:`apply`): deterministic mode would refuse its first matmul from deep inside torch."""
    if device.type == "cuda" and os.environ.get(CUBLAS_ENV) not in (CUBLAS_DETERMINISTIC, ":16:8"):
        raise ConfigError(f"invalid device={str(device)!r} in this process: deterministic CUDA kernels need "
                          f"{CUBLAS_ENV}={CUBLAS_DETERMINISTIC} before CUDA starts (the stabkit command sets it; "
                          "from Python call stabkit.engine.machine.apply() first)")
