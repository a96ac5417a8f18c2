"""Client updates a run stores for unlearning (``--store-updates``), and the hashes of its saved models.

With ``--store-updates`` a run writes, after every round t (1-based, the round's number in ``metrics.csv``),
``RUN/updates/round_<t>.pt``: ``{"cohort": int64 [R, s] trajectory A's clients of the round, "update": [R, s, d]
their updates y_i - x_{t-1}}`` (the final local model minus the round's global model, as FedEraser's server
keeps them; ``stabkit.unlearn``). Disk cost: :func:`update_bytes` = R * s * d * itemsize bytes per round, e.g.
8 pairs x 5 clients x 4,810 parameters (the digits MLP) x 4 bytes = 0.77 MB a round, 77 MB for 100 rounds.
Files are written atomically; a resumed run rewrites the rounds after its checkpoint with the same bytes.

:func:`model_hashes` is the SHA-256 of each saved model file of a round; ``summary.json`` records the final
round's (``models_sha256``), so ``stabkit unlearn`` refuses models edited after the run.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from stabkit.errors import ConfigError
from stabkit.store.atomic import atomic_save
from stabkit.store.rundir import RunDir
from stabkit.store.saved_models import TRAJ, model_path

if TYPE_CHECKING:
    import torch


def updates_path(run_dir, t: int) -> Path:
    return Path(run_dir) / RunDir.UPDATES / f"round_{t}.pt"


def update_bytes(pairs: int, sampled: int, d: int, itemsize: int) -> int:
    """Bytes ``--store-updates`` writes per round (the cohorts' 8-byte ids aside)."""
    return pairs * sampled * d * itemsize


def save_updates(run_dir, t: int, cohort, update: torch.Tensor) -> None:
    """Round t's cohort ``[R, s]`` and client updates ``[R, s, d]`` of trajectory A."""
    import torch  # on use
    atomic_save(updates_path(run_dir, t), {"cohort": torch.as_tensor(cohort, dtype=torch.int64),
                                           "update": update.detach().cpu().clone()})


def load_updates(run_dir, t: int) -> tuple:
    """``(cohort [R, s] numpy, update [R, s, d] tensor)`` of round t; a missing or unreadable file is one line."""
    import torch  # on use
    path = updates_path(run_dir, t)
    if not path.is_file():
        raise ConfigError(f"invalid run={str(run_dir)!r}: no stored client updates for round {t} ({path} is "
                          "missing); rerun it with `stabkit pair --store-updates`")
    try:
        stored = torch.load(path, map_location="cpu", weights_only=True)
        return stored["cohort"].numpy(), stored["update"]
    except Exception as e:
        raise ConfigError(f"invalid stored updates {str(path)!r}: cannot read them ({type(e).__name__}); "
                          "files written by `stabkit pair --store-updates`") from None


def model_hashes(run_dir, t: int, pairs: int) -> dict:
    """``{"round_<t>/pair<r>_<a|b>.pt": sha256 hex}`` of the models saved after round t."""
    out = {}
    for r in range(pairs):
        for traj in TRAJ:
            path = model_path(run_dir, t, r, traj)
            if path.is_file():
                out[f"{path.parent.name}/{path.name}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
