"""Which CPU kernels the engine's numbers come from, recorded with every run.

oneDNN (convolutions) and MKL (matrix products) pick their kernels at run time by the processor's instruction
set (AVX2, AVX-512, AMX) and by the shapes and memory layouts they are handed; two kernels that sum in another
order round differently. So a run repeated on one machine is identical bit for bit, while the same run on a
machine of another instruction set agrees to float rounding only, and these facts in ``config.json`` say why
the last digits of two users' numbers differ.
"""
from __future__ import annotations

import functools
import re

import torch


@functools.lru_cache(maxsize=1)
def kernel_facts() -> dict:
    """The CPU's instruction-set level as torch dispatches on it (e.g. ``AVX512``), the processor's model name,
    and the versions of the oneDNN and MKL libraries torch was built with (``None`` where absent)."""
    build = torch.__config__.show()
    onednn = re.search(r"MKL-DNN v([\w.]+)", build)
    mkl = re.search(r"Math Kernel Library Version ([\w.]+)", build)
    return {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu_model": _cpu_model(),
            "onednn": onednn.group(1) if onednn else None, "mkl": mkl.group(1) if mkl else None}


def _cpu_model() -> str | None:
    """The processor's model name from ``/proc/cpuinfo`` (Linux), else ``None``."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    except OSError:
        return None
