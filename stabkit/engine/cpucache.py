"""stabkit's caching CPU allocator (``cpu_cache.cpp``): blocks of 32 MB and more stay in the process when
their tensors are freed, and the next allocation of the same size takes them back.

Why: glibc serves such blocks with a fresh ``mmap`` each and unmaps them on free, so every large tensor of a
round (a ResNet-18-GN round allocates ~3.7 GB of them: the clients' copy, the per-layer weights, the flat
gradient, the local step, the uploads, their mean) is new memory the kernel must fault in and zero. On
virtual machines that report free memory to their host (virtio-balloon free page reporting, e.g. Firecracker;
stabkit's CI machines: ``page_reporting.page_reporting_order=11``), memory left free for about two seconds is
handed back to the host, and touching it again costs a host fault per page: one 715 MB addition into such
memory took 0.9-1.1 s instead of 0.24 s into memory just freed (``/proc/vmstat``: ~1,850 huge-page faults
per W5 round). With the cache a W5 round faults nothing after the first and took 2.0-2.3 s instead of
2.8-3.9 s (one thread, same process shape, same numbers bit for bit).

The allocator is a few lines of C++ (c10's ``Allocator`` interface has no Python counterpart), compiled on
first use with the system's C++ compiler against the installed torch (~2 s) and kept in
``$XDG_CACHE_HOME/stabkit`` (``~/.cache/stabkit``), one file per source and torch version. Without a
compiler torch's default allocator stays, and runs are the same, only slower there.

``STABKIT_CPU_CACHE_MB``: the most memory the cache keeps for reuse (default a quarter of the machine's
memory; ``0`` leaves torch's allocator alone). Blocks are matched by size rounded up to 2 MB; the least
recently freed go first when the limit is reached, and all of them when an allocation would fail or a run's
rounds end (``PairedRun``: a sweep's next job, or another process, may need the memory). Before a new block is
taken, cached blocks are freed until the kernel reports the block plus 512 MB available: Linux overcommits,
so running out of memory does not fail an allocation but wakes the OOM killer, which would find the cache's
blocks still held (a ResNet-18-GN round on Tiny ImageNet peaked at 22.8 GB of the machine's 24).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from stabkit.errors import ConfigError

SOURCE = Path(__file__).with_name("cpu_cache.cpp")
LIMIT_ENV = "STABKIT_CPU_CACHE_MB"
BUILD_TIMEOUT_S = 300
_lib = None  # the loaded library once installed in this process
_tried = False


def limit_bytes() -> int:
    """The cache's limit from ``STABKIT_CPU_CACHE_MB`` (a whole number of MiB), else a quarter of the memory."""
    raw = os.environ.get(LIMIT_ENV, "").strip()
    if raw:
        if not (raw.isascii() and raw.isdigit()):
            raise ConfigError(f"invalid {LIMIT_ENV} {raw!r}: a whole number of MiB (0 turns the CPU cache off)")
        return int(raw) << 20
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def install() -> bool:
    """Make the cache torch's CPU allocator (once per process; Linux, a C++ compiler and a non-zero limit);
    True if it is installed. Tensors that exist already keep their allocator."""
    global _lib, _tried
    limit = limit_bytes()
    if _lib is not None:
        _lib.stabkit_cpu_cache_install(ctypes.c_size_t(limit))
        return True
    if _tried or limit == 0 or not sys.platform.startswith("linux"):
        return False
    _tried = True
    path = library()
    if path is None:
        return False
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return False
    lib.stabkit_cpu_cache_install.argtypes = [ctypes.c_size_t]
    lib.stabkit_cpu_cache_stats.argtypes = [ctypes.POINTER(ctypes.c_size_t)]
    lib.stabkit_cpu_cache_assume_available.argtypes = [ctypes.c_longlong]
    lib.stabkit_cpu_cache_install(ctypes.c_size_t(limit))
    _lib = lib
    return True


def stats() -> dict:
    """``installed``, ``cached`` bytes held for reuse, ``limit``, ``hits`` and ``misses`` (large blocks)."""
    if _lib is None:
        return {"installed": False, "cached": 0, "limit": 0, "hits": 0, "misses": 0}
    out = (ctypes.c_size_t * 4)()
    _lib.stabkit_cpu_cache_stats(out)
    return {"installed": True, "cached": out[0], "limit": out[1], "hits": out[2], "misses": out[3]}


def assume_available(nbytes: Optional[int]) -> None:
    """Tests: make the cache take ``nbytes`` as the system's available memory (None: the kernel's again)."""
    if _lib is not None:
        _lib.stabkit_cpu_cache_assume_available(-1 if nbytes is None else nbytes)


def release() -> None:
    """Give every cached block back to the system (the cache stays installed)."""
    if _lib is not None:
        _lib.stabkit_cpu_cache_release()


def library() -> Optional[Path]:
    """The compiled allocator for this source and torch, built if missing; None where it cannot be built."""
    import torch

    torch_dir = Path(torch.__file__).parent
    abi = int(torch.compiled_with_cxx11_abi())
    key = hashlib.sha256(SOURCE.read_bytes() + f"{torch.__version__} {abi} {torch_dir}".encode()).hexdigest()[:16]
    try:
        folder = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "stabkit"
    except RuntimeError:  # no home directory to be found
        return None
    path = folder / f"cpu_cache-{key}.so"
    if path.is_file():
        return path
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so.tmp")
        os.close(fd)
    except OSError:
        return None
    cmd = [cxx, "-O2", "-std=c++17", "-fPIC", "-shared", f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
           f"-I{torch_dir / 'include'}", str(SOURCE), "-o", tmp,
           f"-L{torch_dir / 'lib'}", "-lc10", f"-Wl,-rpath,{torch_dir / 'lib'}"]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            return None
        os.replace(tmp, path)  # atomic: a concurrent build (sweep workers) writes the same file
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path
