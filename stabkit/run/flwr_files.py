"""A Flower app's paired run (:class:`~stabkit.run.flwr_app.AppRun`) through the round loop into its run
directory: ``run_app`` starts one, ``resume_app`` continues one from its checkpoint (``stabkit pair --resume``).

Round 1 runs before anything is written, so an app refused there leaves nothing. Then the directory has
``config.json`` (``flwr_app`` marks it as an app run), ``metrics.csv`` (round 0, the common start, then round,
pair, disc, disc_sq, hit, skipped per round; appended after every round), ``checkpoint.pt`` (after every round:
an app's round -- 2 x pairs x s ClientApp calls in Python -- outweighs pickling its strategies, arrays and the
nodes' contexts) and ``summary.json`` with the record every run has: ``completed``; ``diverged`` at the first
round whose arrays are not finite or exceed the divergence threshold (a ClientApp returning NaN included), the
rounds before kept; ``failed`` with the reason when a call fails after round 1; ``interrupted`` (Ctrl-C) --
each with the rounds before kept. A resumed run writes the same bytes as an uninterrupted one.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from stabkit.engine.threads import threads_for
from stabkit.errors import ConfigError
from stabkit.run.flwr_app import AppRun, AppSettings, app_config, check_settings, load_app
from stabkit.run.loop import run_rounds
from stabkit.store.metricslog import AppendLog
from stabkit.store.rundir import RunDir
from stabkit.store.runstore import prepare_run_dir


class AppFiles:
    """The round loop's callback keeping an app run's directory ``out``: opened after round 1 (``overwrite``:
    replacing a run there), rows appended and a checkpoint after every round, the summary at the end. ``log``:
    the metrics of a resumed run, cut back to its checkpoint."""

    def __init__(self, out: Path, overwrite: bool = False, log: Optional[AppendLog] = None):
        self.out, self.overwrite, self.log = Path(out), overwrite, log
        self.rundir = RunDir(out)
        self.summary: Optional[dict] = None

    def _open(self, run) -> None:
        if self.log is None:
            prepare_run_dir(self.out, self.overwrite)
            self.rundir.write_config(app_config(run.spec, run))
            self.log = self.rundir.logs()[0]

    def _flush(self, run, state) -> None:
        """Append the rows of the rounds done (a diverged round's rows are not kept)."""
        self.log.append([g for g in run.take() if g["round"][0] <= state.round])

    def on_round_end(self, run, state) -> None:
        import torch  # imported once round 1 has run: an app refused before answers without it

        from stabkit.store.checkpoint import save_checkpoint

        self._open(run)
        self._flush(run, state)
        with state.timers.timed("checkpoint_s"):
            data = run.saved()
            save_checkpoint(self.out, {"round": state.round, "rounds": state.rounds, "metrics_rows": self.log.rows,
                                       "app": torch.frombuffer(bytearray(data), dtype=torch.uint8),
                                       "times": state.timers.as_dict(), "fingerprint": _fingerprint(run)})

    def on_run_end(self, run, state) -> None:
        self._open(run)
        self._flush(run, state)
        done, wall = state.round, state.timers["wall_s"]
        self.summary = {
            "status": state.status, "rounds_done": done, "diverged_round": state.diverged_round,
            "final_disc_mean": float(np.mean(state.record)), "final_disc_max": float(np.max(state.record)),
            "client_calls": run.client_calls, "wall_s": wall, "s_per_round": wall / max(done, 1),
            "checkpoint_s": state.timers["checkpoint_s"], "skipped_rounds": run.skipped,
            **{k: v for k, v in (("diverged_reason", state.diverged), ("failed_reason", state.failed),
                                 ("interrupted", state.interrupted)) if v}}
        self.rundir.write_summary(self.summary)

    def on_error(self, run, state) -> None:
        if self.log is not None:  # after round 1: keep what was logged
            self._flush(run, state)


class Progress:
    """The caller's ``progress(t)`` after every round."""

    def __init__(self, progress: Callable):
        self.progress = progress

    def on_progress(self, run, state) -> None:
        self.progress(state.round)


def _fingerprint(run: AppRun) -> dict:
    """What a resume must find unchanged: the app run's config but its rounds."""
    return {k: v for k, v in app_config(run.spec, run).items() if k != "rounds"}


def _run(run: AppRun, files: AppFiles, progress, callbacks: Sequence) -> dict:
    told = [Progress(progress)] if progress is not None else []
    with threads_for(0.0):  # the app trains one client's minibatches at a time in Python: small ops, one thread
        run_rounds(run, [files, *told, *callbacks])
    return files.summary


def run_app(spec: str, cfg, out, overwrite: bool = False, progress: Optional[Callable] = None,
            callbacks: Sequence = ()) -> dict:
    """Run the app ``spec`` paired for ``cfg.rounds`` rounds (``cfg``: an :class:`AppSettings` or a
    ``RunConfig``) and write ``out``; return the summary (status ``completed``, ``diverged``, ``failed`` or
    ``interrupted``, as a paired run's). ``callbacks``: more hooks of the round loop (e.g. TensorBoard)."""
    app = load_app(spec)
    check_settings(spec, app, cfg)  # an app refused so far answers before pandas and torch are imported
    run = AppRun(spec, app, cfg)
    run.initial_rows()
    return _run(run, AppFiles(Path(out), overwrite), progress, callbacks)


def resume_app(out, rounds: Optional[int] = None, progress: Optional[Callable] = None,
               callbacks: Sequence = ()) -> dict:
    """Continue the app run in ``out`` from its checkpoint (to ``rounds`` if given, else its own); the app
    is loaded again from its import path. Refused in one line, nothing changed, when the checkpoint is missing,
    damaged or of another run, or the app no longer matches the run."""
    out = Path(out)
    rundir = RunDir(out, "resume")
    config = rundir.config
    cfg = AppSettings(config["seed"], config["pairs"], rounds or config["rounds"], config["perturb"],
                      config["clients_per_round"])
    ck = _checkpoint(out, config, cfg.rounds)
    app = load_app(config["flwr_app"])
    check_settings(config["flwr_app"], app, cfg)
    run = AppRun(config["flwr_app"], app, cfg)
    if _fingerprint(run) != ck["fingerprint"]:
        raise ConfigError(f"invalid resume={str(out)!r}: the app {config['flwr_app']!r} now has other partitions "
                          f"than the run ({_fingerprint(run)} != {ck['fingerprint']}); nothing was changed")
    run.restore(ck["app"].numpy().tobytes(), ck["round"])
    run.state.timers.load(ck["times"])
    log = rundir.logs()[0]
    if log.rows < ck["metrics_rows"]:
        raise ConfigError(f"invalid resume={str(out)!r}: {RunDir.METRICS} has {log.rows} rows, its checkpoint "
                          f"{ck['metrics_rows']}; nothing was changed (start the run again with --overwrite)")
    log.truncate(ck["metrics_rows"])
    rundir.unfinish()  # running again: the run is not finished until it ends
    rundir.write_config(app_config(run.spec, run))
    return _run(run, AppFiles(out, log=log), progress, callbacks)


APP_KEYS = ("round", "rounds", "metrics_rows", "app", "times", "fingerprint")  # what an app run's checkpoint holds


def _checkpoint(out: Path, config: dict, rounds: int) -> dict:
    """The app run's checkpoint, refused in one line unless readable, of this run and within ``rounds``."""
    from stabkit.run.resume_check import load_checkpoint  # imported on use: torch

    ck = load_checkpoint(out, "cpu", APP_KEYS, before="its first round")
    if ck["fingerprint"] != {k: config.get(k) for k in ck["fingerprint"]}:
        raise ConfigError(f"invalid resume={str(out)!r}: {RunDir.CONFIG} was edited since the checkpoint; nothing "
                          "was changed")
    if ck["round"] > rounds:
        raise ConfigError(f"invalid rounds={rounds}: at least the checkpoint's {ck['round']} rounds")
    return ck


__all__ = ["AppFiles", "resume_app", "run_app"]
