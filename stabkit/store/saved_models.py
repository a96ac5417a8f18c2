"""Global models of a run saved as plain state dicts, one file per pair and trajectory.

Layout: ``RUN/models/round_<T>/pair<r>_<a|b>.pt`` (``a`` the run on the original data, ``b`` its
neighbour), each a ``torch.save``-d ``{parameter name: tensor}`` that loads into the task's module::

    module = stabkit.models.registry.build_model(name, task)
    module.load_state_dict(torch.load("RUN/models/round_100/pair0_a.pt"))

and that ``--init`` accepts. Which rounds a run saves is ``--save-models`` (``parse_save_spec``): ``none``,
``final`` (the last round; the default), ``every:N`` (rounds 0, N, 2N, ... and the last) or a comma-separated
list of rounds. Files are written atomically (temporary file + rename), so a killed run never
leaves a half-written model behind.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from stabkit.errors import ConfigError
from stabkit.store.atomic import atomic_save
from stabkit.store.rundir import RunDir
from stabkit.trajectories import TRAJ

if TYPE_CHECKING:  # annotations only: imported on use
    import torch

_ROUND_DIR = re.compile(r"round_(\d+)$")


SAVE_SPEC_HELP = "none, final, every:N (rounds 0, N, 2N, ... and the last) or comma-separated rounds, e.g. 0,50,100"


def parse_save_spec(spec: str, rounds: int) -> Callable[[int], bool]:
    """``wants(t)``: whether a run of ``rounds`` rounds saves its models after round ``t``."""
    spec = str(spec).strip()
    bad = ConfigError(f"invalid save_models={spec!r}: {SAVE_SPEC_HELP} (rounds in [0, {rounds}])")
    if spec == "none":
        return lambda t: False
    if spec == "final":
        return lambda t: t == rounds
    if spec.startswith("every:"):
        n = spec[len("every:"):]
        if not _is_count(n) or int(n) < 1:
            raise bad
        return lambda t: t % int(n) == 0 or t == rounds
    parts = [p.strip() for p in spec.split(",")]
    if not all(_is_count(p) and int(p) <= rounds for p in parts):
        raise bad
    chosen = {int(p) for p in parts}
    return lambda t: t in chosen


def _is_count(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²' or '٣', which ``int`` then rejects."""
    return text.isascii() and text.isdigit()


def check_models_dir(run_dir, spec: str) -> None:
    """ConfigError if a run that saves models (``spec`` not ``none``) finds ``RUN/models`` taken by something
    that is not a directory: checked before any round, not found when the first models are saved."""
    root = Path(run_dir) / RunDir.MODELS
    if str(spec).strip() != "none" and (root.exists() or root.is_symlink()) and not root.is_dir():
        raise ConfigError(f"invalid save_models={spec!r}: {str(root)!r} is a file, not a directory, so no model "
                          "can be saved there; move it away, or give --save-models none")


def model_path(run_dir, t: int, pair: int, traj: str) -> Path:
    """Where the model of ``pair``'s trajectory ``traj`` after round ``t`` is saved."""
    return Path(run_dir) / RunDir.MODELS / f"round_{t}" / f"pair{pair}_{traj}.pt"


def save_models(run_dir, t: int, x: torch.Tensor, names: list, shapes: list) -> None:
    """Save ``x [R, 2, d]`` (flat parameters of both trajectories of every pair) as state dicts keyed by
    the module's parameter ``names`` with their ``shapes`` (``FlatModel.names`` / ``FlatModel.shapes``)."""
    import torch  # on use: the run config reads this module's save spec at start-up, before torch is needed
    numels = [int(torch.Size(s).numel()) for s in shapes]
    R = x.shape[0]
    for r in range(R):
        for j, traj in enumerate(TRAJ):
            parts = torch.split(x[r, j].detach().cpu(), numels)
            state = {n: p.reshape(s).clone() for n, p, s in zip(names, parts, shapes)}
            atomic_save(model_path(run_dir, t, r, traj), state)


def saved_rounds(run_dir) -> list:
    """Rounds whose models were saved, ascending."""
    root = Path(run_dir) / RunDir.MODELS
    if not root.is_dir():
        return []
    found = (_ROUND_DIR.match(p.name) for p in root.iterdir() if p.is_dir())
    return sorted(int(m.group(1)) for m in found if m)


def saved_pairs(run_dir, t: int) -> int:
    """How many pairs saved both trajectories' models after round ``t`` (read from the file names, so without
    torch); a round that was not saved (the :class:`ConfigError` names the rounds that were), a round folder
    without models and a pair missing one trajectory's file are one line each."""
    rounds = saved_rounds(run_dir)
    if t not in rounds:
        have = ", ".join(map(str, rounds)) if rounds else "none (run with --save-models)"
        raise ConfigError(f"invalid round={t}: no models saved for it in {str(run_dir)!r}; saved rounds: {have}")
    pairs = 0
    while model_path(run_dir, t, pairs, "a").is_file():
        pairs += 1
    if not pairs:
        raise ConfigError(f"invalid round={t}: {str(model_path(run_dir, t, 0, 'a').parent)!r} holds no saved model "
                          "(pair0_a.pt missing: a save cut off, or files moved); rerun the run with --save-models")
    for r in range(pairs):  # trajectory a's file was found: b's is the one that can be missing
        path = model_path(run_dir, t, r, "b")
        if not path.is_file():
            raise ConfigError(f"invalid saved model {str(path)!r}: missing (the other trajectory's model is there)")
    return pairs


def load_models(run_dir, t: int) -> list:
    """``[[state_a, state_b], ...]`` (one entry per pair) saved after round ``t``; a round not saved or a
    model file missing is refused as :func:`saved_pairs` refuses it."""
    return [[_load_state(model_path(run_dir, t, r, traj)) for traj in TRAJ]
            for r in range(saved_pairs(run_dir, t))]


def _load_state(path: Path) -> dict:
    """One saved state dict; an unreadable or foreign file is one line naming it."""
    import torch  # on use: the run config reads this module's save spec at start-up, before torch is needed
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, corrupt or not a torch file
        raise ConfigError(f"invalid saved model {str(path)!r}: cannot read it ({type(e).__name__}); "
                          "a state dict written by `stabkit pair --save-models`") from None
    if not (isinstance(state, dict) and state and all(torch.is_tensor(v) for v in state.values())):
        raise ConfigError(f"invalid saved model {str(path)!r}: holds a {type(state).__name__}, not a state dict "
                          "of tensors written by `stabkit pair --save-models`")
    return state


def load_flat(run_dir, t: int, names: list | None = None, shapes: list | None = None) -> torch.Tensor:
    """The saved models of round ``t`` as flat parameters ``[R, 2, d]``: in the order of the model's
    parameter ``names`` with their ``shapes`` when given (a state dict of another architecture is one line
    naming the first mismatch), else in the order saved."""
    import torch  # on use: the run config reads this module's save spec at start-up, before torch is needed
    pairs = load_models(run_dir, t)
    flat = []
    for r, pair in enumerate(pairs):
        for traj, sd in zip(TRAJ, pair):
            if names is not None:
                _check_fits(model_path(run_dir, t, r, traj), sd, names, shapes)
            flat.append(torch.cat([sd[n].reshape(-1) for n in (names if names is not None else sd)]))
    return torch.stack(flat).reshape(len(pairs), len(TRAJ), -1)


def _check_fits(path: Path, state: dict, names: list, shapes: list) -> None:
    expected = dict(zip(names, (tuple(s) for s in shapes)))
    got = {k: tuple(v.shape) for k, v in state.items()}
    if got == expected:
        return
    name = next((n for n in expected if got.get(n) != expected[n]), None) or next(n for n in got if n not in expected)
    what = (f"parameter {name!r} has shape {list(got[name])}, the run's model {list(expected[name])}"
            if name in got and name in expected else
            f"parameter {name!r} is missing" if name in expected else f"unexpected parameter {name!r}")
    raise ConfigError(f"invalid saved model {str(path)!r}: does not fit the run's model ({what}); a model of "
                      "another architecture or run")
