"""Initial parameters shared by both trajectories of a pair (x_0 = x'_0 in every proof).

``default``: the module's own initialisation, seeded per pair from ``(seed, "init", pair)`` so pairs are
independent replicates; ``zeros``; or a file: a saved state dict (``.pt``/``.pth``, e.g. a pretrained
checkpoint, possibly under a ``state_dict``/``model`` key), a saved flat tensor, or a ``.npy`` vector.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch

from stabkit.engine import rng
from stabkit.engine.flatmodel import FlatModel
from stabkit.errors import ConfigError


def initial_parameters(init: str, seed: int, pairs: int, make_module: Callable, flat: FlatModel) -> torch.Tensor:
    """``[R, d]`` starting points, one per pair."""
    if init == "zeros":
        return torch.zeros(pairs, flat.d, dtype=flat.dtype, device=flat.device)
    if init == "default":
        thetas = []
        for r in range(pairs):
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(rng.hash_keys(seed, "init", r)) & 0x7FFFFFFFFFFFFFFF)
                module = make_module()
            thetas.append(torch.cat([p.detach().reshape(-1) for p in module.parameters()]))
        return torch.stack(thetas).to(dtype=flat.dtype, device=flat.device)
    vector = _load_vector(Path(init), flat)
    bad = int((~torch.isfinite(vector.double())).sum())
    if bad:
        raise ConfigError(f"invalid init={init!r}: {bad} of its {vector.numel()} values are NaN or infinite; "
                          "both runs must start from finite parameters")
    return vector.to(dtype=flat.dtype, device=flat.device).expand(pairs, flat.d).clone()


def _load_vector(path: Path, flat: FlatModel) -> torch.Tensor:
    allowed = "allowed: default, zeros, or a .pt/.pth state dict or flat tensor, or a .npy flat vector"
    if not path.is_file():
        raise ConfigError(f"invalid init={str(path)!r}: no such file; {allowed}")
    try:
        obj = np.load(path) if path.suffix == ".npy" else torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # unreadable or foreign format
        raise ConfigError(f"invalid init={str(path)!r}: cannot read it ({type(e).__name__}); {allowed}") from None
    if isinstance(obj, dict):
        obj = obj.get("state_dict", obj.get("model", obj))
        for key, value in obj.items() if isinstance(obj, dict) else ():
            _as_real_vector(path, value, allowed, f" under key {key!r}")
        try:
            flat.module.load_state_dict(obj)
        except (RuntimeError, TypeError, AttributeError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ConfigError(f"invalid init={str(path)!r}: state dict does not fit the model ({first})") from None
        return flat.flatten()
    vector = _as_real_vector(path, obj, allowed)
    if vector.numel() != flat.d:
        raise ConfigError(f"invalid init={str(path)!r}: flat vector has {vector.numel()} entries, "
                          f"the model has {flat.d} parameters")
    return vector


def _as_real_vector(path: Path, obj, allowed: str, where: str = "") -> torch.Tensor:
    """A tensor or array of real numbers, flattened; anything else (a string, a list, text, complex or
    boolean values) is one line saying what the file holds."""
    if isinstance(obj, np.ndarray):
        kind = obj.dtype.kind
        ok = kind in "fiu"
        what = f"an array of dtype {obj.dtype}"
    elif torch.is_tensor(obj):
        ok = not (obj.dtype.is_complex or obj.dtype == torch.bool)
        what = f"a tensor of dtype {str(obj.dtype).replace('torch.', '')}"
    else:
        ok, what = False, f"a {type(obj).__name__}"
    if not ok:
        raise ConfigError(f"invalid init={str(path)!r}: holds {what}{where}, not real (integer or floating) "
                          f"parameters; {allowed}")
    return torch.as_tensor(obj).reshape(-1)
