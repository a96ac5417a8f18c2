"""``RunWriter``: puts one paired run on disk, so that ``PairedRun`` only runs and logs rounds.

It writes ``config.json`` (the configuration and the run's facts), appends the logged rows to ``metrics.csv``
and ``local.csv`` (``stabkit.store.metricslog``), saves the global models of the rounds ``--save-models``
asks for, checkpoints the whole state (``stabkit.store.checkpoint``), and writes ``constants.json`` and
``summary.json`` (with the time accounts' totals and shares); every file atomically (``stabkit.store.atomic``).
When each is written is the round loop's callbacks' (``stabkit.run.callbacks``), which also time it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from stabkit.config.runconfig import RunConfig
from stabkit.run.fingerprint import fingerprint
from stabkit.store.checkpoint import save_checkpoint
from stabkit.store.rundir import RunDir
from stabkit.store.saved_models import parse_save_spec, save_models
from stabkit.store.summary import summarize
from stabkit.store.updates import model_hashes, save_updates


class RunWriter:
    """The files of the run directory ``out`` of the run ``cfg``."""

    def __init__(self, out: Path, cfg: RunConfig):
        self.out, self.cfg = Path(out), cfg
        self.run = RunDir(out)
        self.saves = parse_save_spec(cfg.save_models, cfg.rounds)  # a predicate: nothing O(rounds)
        self.metrics = self.local = None

    def open(self, facts: dict) -> None:
        """Write config.json (``cfg`` and the run's ``facts``) and open the metric logs (continuing existing ones)."""
        self.run.write_config({**self.cfg.to_dict(), **facts})
        self.metrics, self.local = self.run.logs()

    def rewind(self, metrics_rows: int, local_rows: int) -> None:
        """Cut the logs back to their first rows (resume continues from a checkpoint's position)."""
        self.metrics.truncate(metrics_rows)
        self.local.truncate(local_rows)

    def flush(self, rows: list, local_rows: list) -> None:
        """Append the logged rows (DataFrames) of the rounds since the last flush."""
        self.metrics.append(rows)
        self.local.append(local_rows)

    def save_models(self, t: int, x, names: list, shapes: list) -> None:
        """Save the global models ``x [R, 2, d]`` after round t if ``--save-models`` asks for round t."""
        if self.saves(t):
            save_models(self.out, t, x, names, shapes)

    def save_updates(self, t: int, cohort, update) -> None:
        """``--store-updates``: round t's cohort and client updates of trajectory A (``stabkit.store.updates``)."""
        save_updates(self.out, t, cohort, update)

    def checkpoint(self, t: int, state: dict, rec, snapshots: dict, times: dict) -> None:
        """Save the run's ``state`` after round t (``x``, ``server``, ``client_state``), its record ``rec``,
        parameter ``snapshots`` and time accounts ``times``, with the log positions before round t and the
        experiment's fingerprint (``stabkit.run.fingerprint``); the logs must be flushed."""
        pairs, local_t = self.cfg.pairs, len(rec.local) if rec is not None else 0
        save_checkpoint(self.out, {
            "round": t, "rounds": self.cfg.rounds, **state, "record": dataclasses.asdict(rec), "snapshots": snapshots,
            "metrics_rows": self.metrics.rows - pairs, "local_rows": self.local.rows - local_t * pairs,
            "times": times, "fingerprint": fingerprint(self.cfg)})

    def constants(self, estimated: dict, rounds: list) -> None:
        self.run.write_constants({**estimated, "snapshot_rounds": rounds})

    def finish(self, df, status: str, diverged_round, done: int, times: dict, notes: dict, nb) -> dict:
        """Write and return summary.json: the summary of the logged rounds ``df`` (``stabkit.store.summary``; a
        diverged round is logged, not summarised), the ``notes`` and the time accounts ``times`` with their
        total and shares."""
        kept = df[df["round"] < diverged_round] if diverged_round else df
        summary = summarize(kept, status=status, diverged_round=diverged_round, wall_s=times["wall_s"],
                            rounds_done=done, out=str(self.out), nb=nb)
        summary.update(notes)
        if self.saves(done):  # the final models' hashes: `stabkit unlearn` refuses edited ones
            summary["models_sha256"] = model_hashes(self.out, done, self.cfg.pairs)
        total = times["wall_s"] + times["constants_s"]
        summary["time"] = {**times, "total_s": total, "eval_share": times["eval_s"] / total if total else 0.0,
                           "constants_share": times["constants_s"] / total if total else 0.0,
                           "sharpness_share": times.get("sharpness_s", 0.0) / total if total else 0.0}
        self.run.write_summary(summary)
        return summary

