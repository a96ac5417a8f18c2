"""Paper-scale benchmark (issue 22): the papers' CIFAR and Shakespeare presets on fixture data of the real size.

    .venv/bin/python benchmarks/paper_scale.py                          # the presets + the W5 path comparison
    .venv/bin/python benchmarks/paper_scale.py --only w5 --reps 2       # grouped path vs torch.func on W5
    .venv/bin/python benchmarks/paper_scale.py --pairs 8 --clients 10 --steps 2 --device cuda   # on a GPU

* ``fedsagd-cifar10`` (FedAvg CNN), ``fedswa-cifar100`` (ResNet-18-GN) and ``fedsagd-shakespeare`` (the char
  LSTM, on the generic ``torch.func`` path): the preset's run (``--algo fedavg``) on fixture files of the real
  size (50,000 + 10,000 CIFAR images; 2,000 + 400 sequences per LEAF role), built as ``stabkit pair --preset`` builds
  it; ``--steps`` local steps of ``--pairs`` pairs x ``--clients`` clients per round are timed
  (``stabkit.run.estimate``: two rounds, the second counted, and one evaluation) and projected to the
  preset's full round (8 pairs x s clients x K steps) and its T rounds. The projection is linear in client
  models and local steps (the round-time exponents of ``run.py`` are <= 1, so it errs high); the measured
  shape is what fits this machine's memory (8 pairs of ResNet-18-GN x 10 clients hold 6 x 7.2 GB of client
  tensors).
* ``w5``: README workload W5 (ResNet-18-GN, 2 pairs x 4 clients, K = 1, B = 16) one local step at a time on
  the grouped fast path and on the generic ``torch.func`` path, alternately in this process, with % of the
  fp32 GEMM peak measured here too.

Writes ``benchmarks/results_paper_scale.json``.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.run import gemm_peak, gradient_inputs, machine, sync  # noqa: E402
from benchmarks.workloads import workloads  # noqa: E402
from stabkit.config.presets import preset_values  # noqa: E402
from stabkit.config.runconfig import RunConfig  # noqa: E402
from stabkit.engine.evaluation import Evaluator  # noqa: E402
from stabkit.run.estimate import estimate_run, peak_bytes, with_fixture_data  # noqa: E402
from stabkit.run.evalbudget import plan_evaluation  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402

PRESETS = ("fedsagd-cifar10", "fedswa-cifar100", "fedsagd-shakespeare")
TARGET_PAIRS = 8


def preset_case(name: str, pairs: int, clients, steps: int, device: str, peak: float, folder: Path) -> dict:
    full = RunConfig.from_dict({**preset_values(name), "algo": "fedavg", "pairs": TARGET_PAIRS, "device": device})
    s, K, T = full.sampled_clients, full.local_steps, full.rounds
    cfg = full.replace(pairs=pairs, local_steps=steps, constants=False, local_rounds=(),
                       **({"clients_per_round": clients} if clients else {}))
    cfg, task, note = with_fixture_data(cfg, folder)
    run = PairedRun(cfg, task)
    data = run.data  # the evaluation schedule the full run would choose (it depends on the round's cost)
    plan = plan_evaluation(len(data.flat_y), len(data.val_y), len(data.test_y), s * K * cfg.batch_size)
    run.cfg = cfg = cfg.replace(eval_every=plan.every, eval_fraction=plan.fraction, rounds=T)
    run.evaluator = Evaluator(run.model, data, run.nb, plan.fraction, cfg.seed)
    run.evaluator.threads = run.threads
    est = estimate_run(run, rounds=2)
    models = 2 * pairs * cfg.sampled_clients
    flops = run.engine.step_flops * steps  # training FLOPs of the timed round
    gflops = flops / est.round_s / 1e9
    scale = (2 * TARGET_PAIRS * s * K) / (models * steps)  # client-steps of the full round per timed one
    round_full = est.round_s * scale
    eval_scale = TARGET_PAIRS / pairs  # evaluation cost grows with the models evaluated (2R)
    total = round_full * T + (est.eval_s * est.evaluations + est.full_eval_s) * eval_scale
    out = {"preset": name, "model": cfg.model, "d": run.model.d, "note": note,
           "measured": {"pairs": pairs, "clients_per_round": cfg.sampled_clients, "local_steps": steps,
                        "batch": cfg.batch_size, "round_s": est.round_s, "eval_s": est.eval_s,
                        "full_eval_s": est.full_eval_s, "evaluation": est.schedule},
           "gflops": gflops, "peak_fraction": gflops / peak,
           "peak_memory_gb": est.peak_bytes / 2 ** 30,
           "full": {"pairs": TARGET_PAIRS, "clients_per_round": s, "local_steps": K, "rounds": T,
                    "round_s": round_full, "eval_share": 1 - round_full * T / total, "hours": total / 3600}}
    print(f"{name:16s} {cfg.model:12s} timed {pairs} pairs x {cfg.sampled_clients} clients x {steps} steps of "
          f"B={cfg.batch_size}: {est.round_s:.2f} s, {gflops:.1f} GFLOP/s = {100 * gflops / peak:.1f}% of peak, "
          f"peak memory {out['peak_memory_gb']:.2f} GiB; full round ({TARGET_PAIRS} pairs x {s} x {K}) "
          f"{round_full:.0f} s, {T} rounds with evaluation ({est.schedule}): {total / 3600:.1f} h", flush=True)
    del run
    return out


def w5_case(reps: int, peak: float) -> dict:
    """One local step of W5 on the grouped path and on torch.func, alternately; the GEMM peak is probed again
    after every repetition and the best probe (``peak`` included) is the one reported against."""
    w = workloads(1.0, "cpu")["W5"]
    run = PairedRun(w.config(2), task=w.task())
    model, eng = run.model, run.engine
    fast = model.fast
    paths = {"grouped": fast, "torch.func": None}
    times = {k: [] for k in paths}
    for rep in range(reps + 1):  # the first repetition warms up
        for k, path in paths.items():
            model.fast = path
            sync()
            start = time.perf_counter()
            eng.step(rep)
            sync()
            if rep:
                times[k].append(time.perf_counter() - start)
        if eng.x.device.type == "cpu":
            peak = max(peak, gemm_peak("cpu"))
    # the gradient alone (the engine's update of the [R, 2, s, d] state is the rest of a local step)
    theta, x, y = gradient_inputs(run)
    grad_times = {k: [] for k in paths}
    for rep in range(reps + 1):
        for k, path in paths.items():
            model.fast = path
            start = time.perf_counter()
            model.grads(theta, x, y)
            if rep:
                grad_times[k].append(time.perf_counter() - start)
        if eng.x.device.type == "cpu":
            peak = max(peak, gemm_peak("cpu"))
    model.fast = fast
    flops = eng.step_flops
    out = {"workload": w.description, "d": model.d, "gemm_peak_gflops": peak}
    for k in paths:
        t, g = float(np.median(times[k])), float(np.median(grad_times[k]))
        out[k] = {"step_s": t, "gflops": flops / t / 1e9, "peak_fraction": flops / t / 1e9 / peak,
                  "grad_s": g, "grad_peak_fraction": flops / g / 1e9 / peak}
        print(f"W5 {k:10s} {t:6.2f} s per local step, {flops / t / 1e9:5.1f} GFLOP/s = "
              f"{100 * flops / t / 1e9 / peak:4.1f}% of the GEMM peak ({peak:.1f}); the gradient alone {g:6.2f} s = "
              f"{100 * flops / g / 1e9 / peak:4.1f}%", flush=True)
    out["speedup"] = out["torch.func"]["step_s"] / out["grouped"]["step_s"]
    out["grad_speedup"] = out["torch.func"]["grad_s"] / out["grouped"]["grad_s"]
    out["peak_rss_gb"] = peak_bytes(torch.device("cpu")) / 2 ** 30
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="w5," + ",".join(PRESETS))
    p.add_argument("--pairs", type=int, default=1, help="pairs timed (projected to 8)")
    p.add_argument("--clients", type=int, default=2, help="clients per round timed (0: the preset's)")
    p.add_argument("--steps", type=int, default=1, help="local steps timed (projected to the preset's K)")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", default=str(Path(__file__).with_name("results_paper_scale.json")))
    a = p.parse_args(argv)
    only = a.only.split(",")
    peak = gemm_peak(a.device)
    header = machine() + f", GEMM peak {peak:.1f} GFLOP/s"
    print(header, flush=True)
    result = {"machine": header, "gemm_peak_gflops": peak, "cases": []}
    if "w5" in only:
        result["w5"] = w5_case(a.reps, peak)
    with tempfile.TemporaryDirectory(prefix="stabkit-paper-scale-") as tmp:
        for name in (n for n in only if n in PRESETS):
            result["cases"].append(preset_case(name, a.pairs, a.clients, a.steps, a.device, peak,
                                               Path(tmp) / name))
    result["load_average_at_end"] = os.getloadavg()[0]
    Path(a.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
