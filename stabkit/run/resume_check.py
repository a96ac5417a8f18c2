"""Everything ``--resume`` relies on, checked before the run directory is touched.

A resume rewrites ``config.json``, drops ``summary.json`` and cuts the metric logs back to the checkpoint's
positions; if it then failed (a truncated or foreign checkpoint, a log shorter than the checkpoint says), a
finished run would be left looking unfinished, or resumed with rounds missing from its logs. So
:func:`checked_checkpoint` reads and checks it all first and raises a one-line :class:`ConfigError` naming
what is wrong, leaving every file as it was:

* ``config.json``: the experiment the checkpoint's fingerprint records (``stabkit.run.fingerprint``), only
  the fields safe to change may differ;
* ``checkpoint.pt``: readable, a dict of this stabkit's format with every key, its round within the run,
  its models, server and per-client state of the shapes and dtypes this run's config gives (pairs, model
  size, clients), finite models, and the run's own initial model (another run's checkpoint is refused);
* ``metrics.csv``: every round from 0 to the checkpoint's round logged, ``pairs`` rows each, in order, with
  the checkpoint's discrepancy at its round (a log with holes is refused, naming the missing rounds);
* ``local.csv``: the local rounds before the checkpoint logged, in order, for every pair;
* ``sharpness.csv`` (runs with ``--sharpness-rounds``): the sharpness rounds up to the checkpoint measured;
* the directory: writable, with ``models/`` a directory if models are saved, and room for a new checkpoint
  (``stabkit.store.fserrors.require_space``), so a full disk or a read-only folder is refused up front.
"""
from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from stabkit.errors import ConfigError
from stabkit.run.fingerprint import SAFE_TO_CHANGE, changed_fields
from stabkit.store.checkpoint import FORMAT, NAME, checkpoint_path
from stabkit.store.fserrors import require_space
from stabkit.store.outdir import check_writable
from stabkit.store.rundir import RunDir
from stabkit.store.saved_models import check_models_dir

if TYPE_CHECKING:
    import pandas as pd

KEYS = ("round", "rounds", "x", "server", "client_state", "record", "snapshots", "metrics_rows", "local_rows",
        "times")
TIMES = ("train_s", "eval_s", "checkpoint_s", "wall_s")
RESTART = "start the run again with --overwrite"
LOG_SLACK = 1 << 16  # bytes a resume needs beyond its checkpoint and config.json: the first rows of its logs


def read_checkpoint(out, cfg) -> dict:
    """The checkpoint of the run directory ``out``, read (onto the CPU) and refused if it is damaged or
    ``config.json`` (the run's config ``cfg``) describes another experiment than it was written by: the
    checks that need no built run, made before the run is built (a changed experiment is refused in the time
    a checkpoint takes to read, not a task and a model to build)."""
    problem = _Problem(Path(out))
    ck = load_checkpoint(Path(out), torch.device("cpu"))
    _check_experiment(ck, cfg, problem)
    return ck


def checked_checkpoint(run, out, ck: dict | None = None) -> dict:
    """The checkpoint of the run directory ``out`` for ``run`` (a built, not yet started
    :class:`~stabkit.run.experiment.PairedRun` of the run's config), after checking it and the logs
    against each other and against ``run``; ``ck``: what :func:`read_checkpoint` returned (read again
    onto the run's device if that is not the CPU). Nothing is written."""
    out = Path(out)
    problem = _Problem(out)
    if ck is None or run.device.type != "cpu":
        ck = load_checkpoint(out, run.device)
    _check_experiment(ck, run.cfg, problem)
    _check_state(ck, run, problem)
    _check_metrics(out, ck, run.cfg.pairs, problem)
    _check_local(out, ck, run.cfg, problem)
    _check_sharpness(out, ck["round"], run.cfg, problem)
    _check_can_write(out, run.cfg)
    return ck


def _check_can_write(out: Path, cfg) -> None:
    """The resume can write what it writes first: ``models/`` a directory (if it saves models), and room in
    ``out`` for a new checkpoint and ``config.json`` (each rewritten beside the old one) and the first rows."""
    check_models_dir(out, cfg.save_models)
    check_writable(out, "resume")
    need = checkpoint_path(out).stat().st_size + RunDir(out).file(RunDir.CONFIG).stat().st_size + LOG_SLACK
    require_space(out, need, "resume")


class _Problem:
    """Raises the one-line refusal for the run directory ``out``."""

    def __init__(self, out: Path):
        self.out = out

    def __call__(self, what: str, fix: str = RESTART):
        raise ConfigError(f"invalid resume={str(self.out)!r}: {what}; nothing was changed ({fix})")


def load_checkpoint(out: Path, device, keys: tuple = KEYS,
                    before: str = "its first checkpoint, or ran with --checkpoint-every 0") -> dict:
    """The checkpoint of the run directory ``out`` read onto ``device``, refused in one line (nothing changed)
    unless it is there (else the run stopped ``before`` it was written), readable, of this stabkit's format,
    and holds ``keys`` (a paired run's :data:`KEYS`, or an app run's)."""
    problem = _Problem(out)
    path = checkpoint_path(out)
    if not path.is_file():
        raise ConfigError(f"invalid resume={str(out)!r}: no {NAME} there (the run stopped before {before}); start "
                          "it again with --overwrite")
    if path.stat().st_size == 0:
        problem(f"{NAME} is empty (0 bytes)")
    try:
        ck = torch.load(path, map_location=device, weights_only=False)
    except Exception as e:  # truncated zip, foreign pickle, OSError of a torn file: all "unreadable"
        problem(f"{NAME} is unreadable, truncated or damaged ({type(e).__name__}: {_first_line(e)})")
    if not isinstance(ck, dict):
        problem(f"{NAME} holds a {type(ck).__name__}, not a stabkit checkpoint")
    if ck.get("format") != FORMAT:
        problem(f"{NAME} has format {ck.get('format')!r}, this stabkit reads format {FORMAT}",
                "resume it with the stabkit that wrote it, or start the run again with --overwrite")
    missing = [k for k in keys if k not in ck]
    if missing:
        problem(f"{NAME} lacks {', '.join(missing)}")
    return ck


def _check_experiment(ck: dict, cfg, problem) -> None:
    """Refuse a ``config.json`` edited since the checkpoint (checkpoints of stabkit before fingerprints
    carry none: only their shapes and initial model are checked)."""
    recorded = ck.get("fingerprint")
    if recorded is None:
        return
    if not isinstance(recorded, dict):
        problem(f"{NAME} has an invalid experiment fingerprint ({type(recorded).__name__})")
    changed = changed_fields(recorded, cfg)
    if changed:
        problem(f"config.json describes another experiment than {NAME} was written by: {'; '.join(changed)}",
                f"restore config.json, or start a new run with --out; a resume may change only "
                f"{', '.join(SAFE_TO_CHANGE)}")


def _check_state(ck: dict, run, problem) -> None:
    cfg, eng = run.cfg, run.engine
    t, rounds = ck["round"], ck["rounds"]
    if not (_is_int(t) and _is_int(rounds) and 1 <= t <= rounds):
        problem(f"{NAME} is at round {t!r} of {rounds!r} (expected 1 <= round <= rounds)")
    if t > cfg.rounds:
        raise ConfigError(f"invalid rounds={cfg.rounds!r}: at least {t}: the checkpoint of {str(problem.out)!r} "
                          f"is at round {t}")
    _tensor(ck["x"], tuple(eng.x.shape), eng.x.dtype, "x (the global models)", problem)
    if not bool(torch.isfinite(ck["x"]).all()):
        problem(f"{NAME} holds non-finite global models")
    for name, fresh, saved in (("server", eng.server, ck["server"]), ("client_state", eng.client_state,
                                                                       ck["client_state"])):
        if not isinstance(saved, dict) or set(saved) != set(fresh):
            have = sorted(saved) if isinstance(saved, dict) else type(saved).__name__
            problem(f"{NAME} has {name} {have}, this run's algorithm {cfg.algo!r} keeps {sorted(fresh)}")
        for key, value in fresh.items():
            _tensor(saved[key], tuple(value.shape), value.dtype, f"{name}[{key!r}]", problem)
    if ("host" in ck) != (run.algo.host_state() is not None):
        problem(f"{NAME} {'holds' if 'host' in ck else 'lacks'} state kept outside the tensors (e.g. Flower "
                f"strategies), which this run's algorithm {cfg.algo!r} {'does not keep' if 'host' in ck else 'keeps'}")
    _check_record(ck["record"], cfg, tuple(eng.x.shape), problem)
    snaps = ck["snapshots"]
    d = eng.x.shape[-1]
    if not isinstance(snaps, dict) or 0 not in snaps or not all(_is_int(r) and 0 <= r <= t for r in snaps):
        problem(f"{NAME} has no valid parameter snapshots (rounds 0..{t})")
    for r, v in snaps.items():
        _tensor(v, (d,), eng.x.dtype, f"snapshot of round {r}", problem)
    if not torch.allclose(snaps[0].to(eng.x.device), eng.x[0, 0], rtol=1e-4, atol=1e-6):
        problem(f"{NAME} belongs to another run (its initial model differs from this run's config: seed "
                f"{cfg.seed}, init {cfg.init!r})")
    times = ck["times"]
    if not isinstance(times, dict) or not all(isinstance(times.get(k), (int, float)) and math.isfinite(times[k])
                                              and times[k] >= 0 for k in TIMES):
        problem(f"{NAME} has invalid times {times!r} (expected {', '.join(TIMES)} in seconds)")
    for key in ("metrics_rows", "local_rows"):
        if not (_is_int(ck[key]) and ck[key] >= 0):
            problem(f"{NAME} has {key}={ck[key]!r} (expected a non-negative integer)")


def _check_record(rec, cfg, shape: tuple, problem) -> None:
    from stabkit.engine.paired import RoundRecord

    fields = {f.name for f in dataclasses.fields(RoundRecord)}
    if not isinstance(rec, dict) or set(rec) != fields:
        problem(f"{NAME} has a round record with fields {sorted(rec) if isinstance(rec, dict) else rec!r}, "
                f"expected {sorted(fields)}")
    R, _, d = shape
    s = cfg.sampled_clients
    if np.shape(rec["rows"]) != (R, 2, s):
        problem(f"{NAME} records clients of shape {np.shape(rec['rows'])}, this run samples {(R, 2, s)} "
                f"({R} pairs, {s} clients per round)")
    for key in ("hit", "theta_max", "theta_rms"):
        if np.shape(rec[key]) != (R,):
            problem(f"{NAME} records {key} of shape {np.shape(rec[key])}, this run has {R} pairs")
    if not isinstance(rec["local"], (list, tuple)) or not all(isinstance(e, (list, tuple)) and len(e) == 4
                                                              for e in rec["local"]):
        problem(f"{NAME} has an invalid local-discrepancy record")
    if rec["clients"] is not None and tuple(np.shape(rec["clients"])) != (R, 2, s, d):
        problem(f"{NAME} records client models of shape {tuple(np.shape(rec['clients']))}, expected "
                f"{(R, 2, s, d)}")


def _tensor(value, shape: tuple, dtype, what: str, problem) -> None:
    if not torch.is_tensor(value):
        problem(f"{NAME} has {what} of type {type(value).__name__}, expected a tensor")
    if tuple(value.shape) != shape or value.dtype != dtype:
        problem(f"{NAME} has {what} of shape {tuple(value.shape)} ({value.dtype}), this run's config gives "
                f"{shape} ({dtype}): it is another run's checkpoint (pairs, model size or clients differ)")


def _read_log(path: Path, columns: tuple, problem) -> pd.DataFrame:
    """The whole lines of a log (as ``AppendLog`` counts them), with ``columns``."""
    import pandas as pd

    if not path.is_file():
        problem(f"{path.name} is missing", f"restore it, or {RESTART}")
    try:
        text = path.read_text()
        text = text[: text.rfind("\n") + 1]
        df = pd.read_csv(io.StringIO(text)) if text else pd.DataFrame()
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as e:
        problem(f"{path.name} is not a readable table ({_first_line(e)})", f"restore it, or {RESTART}")
    lacking = [c for c in columns if c not in df.columns]
    if lacking:
        problem(f"{path.name} lacks the column{'s' * (len(lacking) > 1)} {', '.join(lacking)}",
                f"restore it, or {RESTART}")
    return df


def _check_metrics(out: Path, ck: dict, R: int, problem) -> None:
    import pandas as pd

    t, n = ck["round"], ck["metrics_rows"] + R
    if n != (t + 1) * R:
        problem(f"{NAME} says metrics.csv had {ck['metrics_rows']} rows before round {t}, but a run of {R} "
                f"pairs logs {t * R} (another run's checkpoint?)")
    head = _read_log(RunDir(out).file(RunDir.METRICS), ("round", "pair", "disc"), problem).iloc[:n]
    rounds = pd.to_numeric(head["round"], errors="coerce")
    counts = rounds.value_counts()
    missing = [r for r in range(t + 1) if counts.get(r, 0) < R]
    if missing:
        problem(f"metrics.csv lacks round{'s' * (len(missing) > 1)} {_ranges(missing)} (of rounds 0-{t} that {NAME} "
                f"says were logged)", f"restore metrics.csv, or {RESTART}; resuming would leave a hole in the log")
    in_order = np.array_equal(rounds.to_numpy(), np.repeat(np.arange(t + 1), R)) and np.array_equal(
        pd.to_numeric(head["pair"], errors="coerce").to_numpy(), np.tile(np.arange(R), t + 1))
    if not in_order:
        problem(f"metrics.csv does not hold rounds 0-{t} in order, one row per pair ({R} pairs)",
                f"restore metrics.csv, or {RESTART}")
    logged = pd.to_numeric(head["disc"].iloc[-R:], errors="coerce").to_numpy(dtype=float)
    want = (ck["x"][:, 0] - ck["x"][:, 1]).norm(dim=-1).cpu().numpy()  # as the engine logs it
    if not np.allclose(logged, want, rtol=1e-4, atol=0):
        problem(f"metrics.csv logs a discrepancy at round {t} ({logged[0]:.6g} for pair 0) other than {NAME}'s "
                f"({want[0]:.6g}): the checkpoint belongs to another run",
                f"restore the run's own {NAME}, or {RESTART}")


def _check_local(out: Path, ck: dict, cfg, problem) -> None:
    t, R = ck["round"], cfg.pairs
    tracked = [r for r in sorted(set(cfg.local_rounds)) if r <= t - 1]  # local rows carry round t - 1 of step t
    if not tracked:
        return
    per_round = (cfg.local_steps + 1) * R  # local steps k = 0..K, every pair
    n = ck["local_rows"] + len(ck["record"]["local"]) * R
    df = _read_log(RunDir(out).file(RunDir.LOCAL), ("round", "pair", "k"), problem)
    expected = np.repeat(tracked, per_round)
    head = df.iloc[:n]
    rounds = _integer_rounds(head, RunDir.LOCAL, problem)
    if n != len(expected) or len(head) < n or not np.array_equal(rounds, expected):
        logged = set(rounds.tolist())
        missing = [r for r in tracked if r not in logged]
        problem((f"local.csv lacks local round{'s' * (len(missing) > 1)} {_ranges(missing)} that {NAME} (after "
                 f"round {t}) says were logged") if missing else
                f"local.csv does not match {NAME} (expected local rounds {_ranges(tracked)}, {per_round} rows each)",
                f"restore local.csv, or {RESTART}; resuming would leave a hole in the log")


def _check_sharpness(out: Path, t: int, cfg, problem) -> None:
    wanted = [r for r in sorted(set(cfg.sharpness_rounds)) if r <= t]
    if not wanted:
        return
    df = _read_log(RunDir(out).file(RunDir.SHARPNESS), ("round",), problem)
    missing = sorted(set(wanted) - set(_integer_rounds(df, RunDir.SHARPNESS, problem).tolist()))
    if missing:
        problem(f"sharpness.csv lacks sharpness round{'s' * (len(missing) > 1)} {_ranges(missing)} measured "
                f"before {NAME} (round {t})", f"restore sharpness.csv, or {RESTART}")


def _integer_rounds(df: pd.DataFrame, name: str, problem) -> np.ndarray:
    """The ``round`` column of the log ``name`` as integers; an entry that is not one (a hand edit, a torn
    copy) is refused naming it and its line."""
    import pandas as pd

    values = pd.to_numeric(df["round"], errors="coerce").to_numpy(dtype=float)
    bad = np.flatnonzero(~(np.isfinite(values) & (values == np.round(values))))
    if len(bad):
        problem(f"{name} has a round {str(df['round'].iloc[bad[0]])!r} in line {bad[0] + 2}, not an integer",
                f"restore {name}, or {RESTART}")
    return values.astype(np.int64)


def _ranges(rounds: list) -> str:
    """``[7, 8, 9, 12]`` -> ``"7-9, 12"``."""
    parts, start = [], None
    for i, r in enumerate(rounds):
        if start is None:
            start = r
        if i + 1 == len(rounds) or rounds[i + 1] != r + 1:
            parts.append(str(r) if r == start else f"{start}-{r}")
            start = None
    return ", ".join(parts)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return line if len(line) <= 100 else line[:99] + "…"
