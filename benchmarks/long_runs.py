"""Long-run costs on CIFAR-10 shapes (issue 14): evaluation share with the default evaluation, checkpoint
overhead at the default interval, resume start-up. One command:

    .venv/bin/python benchmarks/long_runs.py [--data DIR] [--pairs 1] [--json benchmarks/results_long_runs.json]

Workload: fixture data of the real size (``stabkit.fixtures.write_cifar``: 50,000 training and 10,000 test
images), 100 clients, s = 10 per round, K = 5 epochs of B = 50 local steps, the FedAvg CNN, FedAvg.
A full round of this on 2 CPU cores takes many minutes, so the parts are timed separately and scaled
linearly: a round from ``--steps`` timed local steps (x K / steps), the per-round evaluation of the default
plan from an evaluation on ``--eval-fraction`` of the data (x plan fraction / measured fraction; the last
round's all-data evaluation likewise), a checkpoint of the run's state directly, and resume start-up
(build the run from its config.json + load the checkpoint) directly. Not part of the test suite.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stabkit.config.runconfig import CHECKPOINT_EVERY, RunConfig  # noqa: E402
from stabkit.config.taskoptions import TaskOptions  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.engine.evaluation import Evaluator  # noqa: E402
from stabkit.engine.paired import PairedEngine  # noqa: E402
from stabkit.fixtures import write_cifar  # noqa: E402
from stabkit.run.experiment import PairedRun, engine_settings, resume_config  # noqa: E402
from stabkit.run.resume_check import read_checkpoint  # noqa: E402
from stabkit.store.atomic import atomic_write_json  # noqa: E402
from stabkit.store.checkpoint import save_checkpoint  # noqa: E402

EPOCHS, BATCH, CLIENTS, PER_ROUND = 5, 50, 100, 10


def config(data_dir: Path, pairs: int, local_steps: int) -> RunConfig:
    return RunConfig(algo="fedavg", task="cifar10", model="fedavg_cnn", pairs=pairs, clients_per_round=PER_ROUND,
                     local_steps=local_steps, batch_size=BATCH, constants=False, device="cpu",
                     task_options=TaskOptions(clients=CLIENTS, data_dir=str(data_dir)))


def clock(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(data_dir: Path, pairs: int, steps: int, eval_fraction: float, train: int, test: int) -> dict:
    if not (data_dir / "cifar-10-batches-py" / "test_batch").is_file():
        write_cifar(data_dir, "cifar10", train=train, test=test)
    probe = PairedRun(config(data_dir, pairs, 1))
    n_mean = float(np.mean(probe.data.n_np[:CLIENTS]))
    K = max(1, round(EPOCHS * n_mean / BATCH))
    cfg = config(data_dir, pairs, K)
    start = time.perf_counter()
    run = PairedRun(cfg)
    build_s = time.perf_counter() - start
    plan = run.eval_plan
    set_deterministic()  # as PairedRun.run does
    # training: `steps` local steps of the same round, scaled to K
    short = PairedEngine(engine_settings(cfg.replace(local_steps=steps)), run.algo, run.model, run.data, run.nb, run.engine.x[:, 0])
    short.step(0)  # warm-up (threads, allocator, first gathers)
    step_s = clock(lambda: short.step(1)) / steps
    round_s = step_s * K
    rec = short.step(2)
    # evaluation: the plan's per-round evaluation and the last round's all-data one, from a smaller subset
    small = Evaluator(run.model, run.data, run.nb, eval_fraction, cfg.seed)
    small.evaluate(run.engine.x, rec.rows)
    small_s = clock(lambda: small.evaluate(run.engine.x, rec.rows))
    eval_s = small_s * plan.fraction / eval_fraction / plan.every
    full_eval_s = small_s / eval_fraction
    # checkpoint and resume start-up, on a run directory holding this run's config and checkpoint
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        atomic_write_json(out / "config.json", run.cfg.to_dict())
        state = {"round": 3, "rounds": cfg.rounds, "x": run.engine.x, "server": run.engine.server, "client_state": run.engine.client_state,
                 "record": None, "snapshots": {}, "metrics_rows": 0, "local_rows": 0, "times": dict(run.times)}
        ckpt_s = clock(lambda: save_checkpoint(out, state))
        ckpt_bytes = os.path.getsize(out / "checkpoint.pt")
        start, cpu = time.perf_counter(), time.process_time()
        resumed = PairedRun(resume_config(out))
        read_checkpoint(out, resumed.cfg)
        resume_s, resume_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    per_round = round_s + eval_s
    return {
        "workload": {"train": train, "test": test, "clients": CLIENTS, "clients_per_round": PER_ROUND,
                     "local_steps": K, "batch_size": BATCH, "pairs": pairs, "model": "fedavg_cnn", "d": run.model.d},
        "evaluation": run.describe_evaluation(), "eval_every": plan.every, "eval_fraction": plan.fraction,
        "build_s": build_s, "step_s": step_s, "round_train_s": round_s, "round_eval_s": eval_s,
        "s_per_round": per_round, "eval_share": eval_s / per_round, "eval_share_planned": plan.share,
        "full_eval_s": full_eval_s, "exact_eval_share": full_eval_s / (full_eval_s + round_s),
        "eval_share_100_rounds": (99 * eval_s + full_eval_s) / (100 * round_s + 99 * eval_s + full_eval_s),
        "checkpoint_s": ckpt_s, "checkpoint_mb": ckpt_bytes / 2 ** 20, "checkpoint_every": CHECKPOINT_EVERY,
        "checkpoint_overhead": ckpt_s / (ckpt_s + CHECKPOINT_EVERY * per_round),
        "resume_startup_s": resume_s, "resume_startup_cpu_s": resume_cpu_s,
        "finished_run_resume_relog_eval_s": eval_s * plan.every,
        "measured": {"steps": steps, "eval_fraction": eval_fraction, "eval_s_at_fraction": small_s},
        "threads": torch.get_num_threads(), "load_avg": os.getloadavg(),
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=None, help="fixture directory (kept; default: a temporary one)")
    p.add_argument("--pairs", type=int, default=1)
    p.add_argument("--steps", type=int, default=2, help="local steps timed (scaled to K)")
    p.add_argument("--eval-fraction", type=float, default=0.02, help="evaluation subset timed (scaled)")
    p.add_argument("--train", type=int, default=50_000)
    p.add_argument("--test", type=int, default=10_000)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        res = measure(Path(a.data or tmp), a.pairs, a.steps, a.eval_fraction, a.train, a.test)
    print(res["evaluation"])
    print(f"s/round {res['s_per_round']:.1f} (train {res['round_train_s']:.1f}, eval {res['round_eval_s']:.1f}); "
          f"evaluation share {res['eval_share']:.0%} per round, {res['eval_share_100_rounds']:.0%} over 100 rounds "
          f"with the all-data last round (exact every round: {res['exact_eval_share']:.0%}); "
          f"checkpoint {res['checkpoint_s']:.3f} s = {res['checkpoint_overhead']:.2%} at every "
          f"{res['checkpoint_every']} rounds; resume start-up {res['resume_startup_s']:.1f} s "
          f"({res['resume_startup_cpu_s']:.1f} s CPU; a finished run extended also re-evaluates its last round: "
          f"+{res['finished_run_resume_relog_eval_s']:.1f} s); load {res['load_avg']}")
    if a.json:
        atomic_write_json(Path(a.json), res)
    return res


if __name__ == "__main__":
    main()
