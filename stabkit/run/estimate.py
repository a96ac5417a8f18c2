"""Time to result before committing to it: ``stabkit pair ... --estimate`` and ``stabkit presets NAME --estimate``.

A run is built exactly as ``stabkit pair`` would build it (same data, model, fast path, threads, evaluation
schedule), then probes of a round (a few clients, one and two local steps) and of an evaluation (at most
``PROBE_SAMPLES`` samples) are timed and projected onto the whole run: all pairs (they run as one batch, so a
round's time already holds them), the run's clients and local steps, every round (in closed form: ``--rounds
10**18`` answers as fast as ``--rounds 10``), the evaluation schedule (the subset evaluations, round 0's
included, plus the all-data evaluation of the last round, scaled by the number of samples: evaluation runs in
memory-bounded chunks, so its time is linear in them). Nothing is written. The constants estimated after a run are not included (they use at most 2,048 samples once; the
summary of a real run reports their time). A preset whose data files are absent is timed on fixture data of
the real size in the published format (random pixels: throughput does not depend on them).
"""
from __future__ import annotations

import dataclasses
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from stabkit.run.evalbudget import evaluated_rounds
from stabkit.run.loop import EngineRounds, run_rounds

# Real sizes (train, test) of the image sets whose files :mod:`stabkit.tasks.fixtures` writes as arrays.
REAL_SIZES = {"cifar10": (50_000, 10_000), "cifar100": (50_000, 10_000), "mnist": (60_000, 10_000),
              "fashion_mnist": (60_000, 10_000), "emnist_l": (48_000, 8_000)}  # EMNIST: letters a-j, the part read
# LEAF Shakespeare: sequences per role (train, test), as many as the loader keeps (FedDyn / FedSAGD: 2,000 + 400
# per client), for every role the run reads (its clients and held-out clients)
LEAF_SAMPLES = (2000, 400)
# Tiny ImageNet: classes, training JPEGs per class, validation JPEGs (the published 100,000 + 10,000; ~1 min to
# write here, and the loader decodes them as it decodes the real ones)
TINYIMAGENET = (200, 500, 10_000)
FIXTURE_TASKS = (*REAL_SIZES, "shakespeare", "tinyimagenet")  # the tasks _write_fixture writes
# The probes timed: clients per round and local steps of a round (scaled to the run's), samples of an evaluation
PROBE_CLIENTS = 2
PROBE_STEPS = 2
PROBE_SAMPLES = 512


@dataclass
class Estimate:
    """Seconds per round and per evaluation as timed, and the run they are projected onto."""

    round_s: float
    probe: str  # what was timed to project a round (stabkit.run.estimate.round_seconds)
    eval_s: float  # one evaluation on the run's evaluation subset
    full_eval_s: float  # the all-data evaluation of the last round (scaled from eval_s by the samples)
    evaluations: int  # subset evaluations of the whole run (round 0 and every eval_every-th round)
    rounds: int
    pairs: int
    peak_bytes: int  # peak RSS (CPU) or peak allocated device memory (CUDA)
    device: str
    threads: object
    schedule: str

    @property
    def train_total_s(self) -> float:
        return self.round_s * self.rounds

    @property
    def eval_total_s(self) -> float:
        return self.eval_s * self.evaluations + self.full_eval_s

    @property
    def total_s(self) -> float:
        return self.train_total_s + self.eval_total_s

    @property
    def eval_share(self) -> float:
        return self.eval_total_s / self.total_s if self.total_s else 0.0

    def to_dict(self) -> dict:
        return {**self.__dict__, "total_s": self.total_s, "eval_share": self.eval_share}

    def describe(self) -> str:
        """The one line a researcher decides "CPU, one GPU or a cluster" from."""
        where = self.device + (f", {self.threads} thread{'s' * (self.threads != 1)}" if self.threads else "")
        return (f"estimate: {self.round_s:.3g} s/round ({self.pairs} pairs x 2 trajectories; {self.probe}), "
                f"evaluation {self.eval_s:.3g} s ({self.schedule}) = {self.eval_share:.0%} of the "
                f"run, peak memory {self.peak_bytes / 2 ** 30:.2f} GiB; projected {self.rounds} rounds: "
                f"{_duration(self.total_s)} on this machine ({where}); nothing written")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    if seconds < 1000 * 86400:
        return f"{seconds / 86400:.1f} days"
    return f"{seconds / (365.25 * 86400):.3g} years"


def peak_bytes(device) -> int:
    """Peak memory of this process so far: device memory on CUDA, resident set size on the CPU."""
    import torch

    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)  # bytes on macOS, KiB on Linux


def _synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def estimate_run(run, rounds: int = 2) -> Estimate:
    """Time the rounds and one evaluation of the built ``PairedRun`` ``run`` on probes (:func:`round_seconds`,
    :func:`eval_seconds`; each timed up to ``rounds`` times, the fastest kept) and project them onto its whole
    schedule, in time independent of its number of rounds. The run's state advances; it is meant to be
    thrown away."""
    cfg, dev = run.cfg, run.device
    round_s, probe = round_seconds(run, rounds)
    eval_s, full_s = eval_seconds(run, rounds)
    T, every = cfg.rounds, cfg.eval_every
    evaluations = evaluated_rounds(T, every) - 1  # on the subset; the last round's (all data) is full_s
    schedule = (("every round" if every == 1 else f"every {every} rounds") + " on " +
                ("all data" if cfg.eval_fraction >= 1 else f"{cfg.eval_fraction:.0%} of the data"))
    return Estimate(round_s, probe, eval_s, full_s, evaluations, T, cfg.pairs, peak_bytes(dev), dev.type,
                    run.threads, schedule)


def round_seconds(run, repeats: int = 2) -> tuple:
    """``(seconds per round, what was timed)``: a round of ``PROBE_CLIENTS`` clients with one local step and
    one with ``PROBE_STEPS`` (fewer where the run has fewer) give the cost of a step per client and of the
    rest of the round; scaled to the run's clients and local steps (a round's batched work is linear in
    both). A round of a ResNet-18 on 10 clients x 50 steps takes minutes on a CPU; its probe, seconds."""
    eng, dev = run.engine, run.device
    settings, s, K = eng.cfg, eng.s, run.cfg.local_steps
    sp, kp = min(s, PROBE_CLIENTS), min(K, PROBE_STEPS)

    def timed(k: int) -> float:
        eng.cfg = dataclasses.replace(settings, local_steps=k)
        return _fastest(lambda: run_rounds(EngineRounds((eng,), 1)), dev, repeats)  # round 0 each time

    eng.s = sp
    try:
        timed(1)  # warm-up: first-use allocations and kernel choices
        t1 = timed(1)
        tk = timed(kp) if kp > 1 else t1
    finally:
        eng.cfg, eng.s = settings, s
    per_step = max(tk - t1, 0.0) / (kp - 1) if kp > 1 else t1
    rest = max(t1 - per_step, 0.0)
    probe = f"{sp} client{'s' * (sp > 1)} x {kp} local step{'s' * (kp > 1)} timed"
    return rest + per_step * K * s / sp, probe


def eval_seconds(run, repeats: int = 2) -> tuple:
    """``(one evaluation on the run's subset, the last round's all-data evaluation)`` in seconds: timed on at
    most ``PROBE_SAMPLES`` samples (a probe subset of the run's own) and scaled by samples (evaluation runs in
    memory-bounded chunks, so its time is linear in them)."""
    from stabkit.engine.evaluation import Evaluator

    cfg, ev = run.cfg, run.evaluator
    n = _samples(ev)
    if n > PROBE_SAMPLES:
        ev = Evaluator(run.model, run.data, run.nb, cfg.eval_fraction * PROBE_SAMPLES / n, cfg.seed)
        ev.threads = run.threads
    eval_s = _fastest(lambda: ev.evaluate(run.engine.x, None), run.device, repeats) * n / _samples(ev)
    return eval_s, eval_s if cfg.eval_fraction >= 1 else eval_s * _all_samples(run) / n


def _samples(ev) -> int:
    return sum(len(part[1]) for part in (ev.train, ev.val, ev.test))


def _fastest(fn, device, repeats: int, budget_s: float = 0.5) -> float:
    """The fastest of up to ``repeats`` timings of ``fn``, repeated only while they take under ``budget_s``
    together (a probe of a large model is timed once)."""
    times = [_timed(fn, device)]
    while len(times) < repeats and sum(times) < budget_s:
        times.append(_timed(fn, device))
    return min(times)


def _all_samples(run) -> int:
    data = run.data
    return len(data.flat_y) + len(data.val_y) + len(data.test_y)


def _timed(fn, device) -> float:
    _synchronize(device)
    start = time.perf_counter()
    fn()
    _synchronize(device)
    return time.perf_counter() - start


def with_fixture_data(cfg, folder: Path):
    """``(cfg, task, note)``: the task of ``cfg`` built from its files; where a data set's files are absent
    (no ``--data-dir``, or one without them), from fixture files of the real size written into ``folder``
    (``cfg`` then reads them and ``note`` says so). A ``--data-dir`` that is not a directory is refused."""
    import dataclasses

    from stabkit.errors import ConfigError

    data_dir = cfg.task_options.data_dir
    if data_dir is not None and not Path(data_dir).is_dir():  # a mistyped path, found now, not when the run starts
        raise ConfigError(f"invalid data_dir={data_dir!r}: {'a file, not a' if Path(data_dir).exists() else 'no such'} "
                          "directory; give the folder holding the data set's files (leave --data-dir out to time "
                          "fixture data of the real size)")
    from stabkit.run.preflight import build_checked_task  # after the path's check: it imports torch (~1.5 s)

    try:
        return cfg, build_checked_task(cfg), None
    except ConfigError:
        if cfg.task not in FIXTURE_TASKS:
            raise
    size = _write_fixture(cfg, folder)
    where = f"under {cfg.task_options.data_dir}" if cfg.task_options.data_dir else "(no --data-dir)"
    note = (f"data files of {cfg.task} not found {where}: timing on fixture data of the real size "
            f"({size} in the published format)")
    cfg = cfg.replace(task_options=dataclasses.replace(cfg.task_options, data_dir=str(folder)))
    return cfg, build_checked_task(cfg), note


def _write_fixture(cfg, folder: Path) -> str:
    """Write random data of the real size for ``cfg``'s task into ``folder``; what was written, in words."""
    from stabkit.tasks import fixtures

    if cfg.task == "shakespeare":
        roles = cfg.task_options.clients + cfg.task_options.heldout_clients
        fixtures.write_leaf(folder, roles, LEAF_SAMPLES)
        return f"{roles} roles x {LEAF_SAMPLES[0]:,} + {LEAF_SAMPLES[1]:,} random sequences"
    if cfg.task == "tinyimagenet":
        classes, per_class, val = TINYIMAGENET
        fixtures.write_tinyimagenet(folder, classes, per_class, val, decoded=False)
        return f"{classes * per_class:,} + {val:,} random JPEGs"
    train, test = REAL_SIZES[cfg.task]
    if cfg.task.startswith("cifar"):
        fixtures.write_cifar(folder, cfg.task, train, test)
    else:
        fixtures.write_idx(folder, cfg.task, train, test)
    return f"{train:,} + {test:,} random samples"


def estimate_config(cfg, rounds: int = 2, echo=print) -> Estimate:
    """Build the run of ``cfg`` (on fixture data of the real size where its files are absent), time it
    and print the estimate line; nothing is written."""
    with tempfile.TemporaryDirectory(prefix="stabkit-estimate-") as tmp:
        cfg, task, note = with_fixture_data(cfg, Path(tmp))  # a --data-dir that is no folder: refused before torch
        from stabkit.run.experiment import PairedRun

        if note:
            echo(note)
        run = PairedRun(cfg, task)
        echo(run.describe_evaluation())
        est = estimate_run(run, rounds)
    echo(est.describe())
    return est
