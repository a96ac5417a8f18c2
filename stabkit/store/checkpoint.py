"""Checkpoints: the whole state of a paired run after a round, so ``stabkit pair --resume`` continues it.

``RUN/checkpoint.pt`` holds the global models, the server state and the per-client state of both
trajectories of every pair (everything the engine carries between rounds; all randomness is counter-based,
keyed on the round, so no generator state is needed), the round, what that round measured (to log its
row again with the evaluation the resumed schedule asks for), the number of rows of ``metrics.csv`` /
``local.csv`` before that round, the parameter snapshots kept for the constants and the time spent so far.
It is written to a temporary file, fsync-ed and renamed, so a kill at any moment leaves the previous
checkpoint or the new one, never a torn one. ``stabkit.run.resume_check`` reads it back, checked against
the run's config and logs.
"""
from __future__ import annotations

from pathlib import Path

import torch

from stabkit.store.atomic import atomic_save
from stabkit.store.rundir import RunDir

NAME = RunDir.CHECKPOINT
FORMAT = 1


def checkpoint_path(run_dir) -> Path:
    return Path(run_dir) / NAME


def save_checkpoint(run_dir, state: dict) -> None:
    """Write ``state`` (tensors moved to the CPU) atomically to ``RUN/checkpoint.pt``."""
    atomic_save(checkpoint_path(run_dir), {"format": FORMAT, **_to_cpu(state)})


def _to_cpu(obj):
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj
