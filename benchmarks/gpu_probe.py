"""Where a GPU round goes (issue 22): engine round, kernel-busy share, gradient variants, one process.

    python3 benchmarks/gpu_probe.py [--only W2,W4,W5] [--reps 5]      # on a lent CUDA device

For each case (W2 LeNet-5 at 8 pairs; W4 FedAvg CNN at the FedSAGD CIFAR-10 preset's shape, 8 pairs x 4
clients x B = 50; W5 ResNet-18-GN at 2 pairs x 10 clients x B = 50, the FedSWA preset's clients and batch):

* the engine round (``PairedEngine.step``, synchronised), GFLOP/s and % of the fp32 (TF32 off) GEMM peak
  measured at the start of this process;
* the share of the round the GPU is busy (sum of CUDA kernel times from ``torch.profiler`` over the wall
  time): near 100% means kernel-bound, far below means launch/host-bound;
* the round with CUDA-graph replay of the gradient (the default on CUDA) and eager (``STABKIT_CUDA_GRAPHS=0``);
* the gradient alone (``FlatModel.grads`` on one step's shapes): eager, with ``cudnn.benchmark`` on (among
  deterministic algorithms), in channels-last, and replayed from a captured CUDA graph;
* the top CUDA kernels of one round;
* W2: the per-client loop (``benchmarks/baseline.py``) on the same GPU, for the ratio per trajectory.

Writes ``$OUT/gpu_probe.json`` when ``OUT`` is set, else ``benchmarks/results_gpu_probe.json``.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.baseline import PerClientLoop  # noqa: E402
from benchmarks.run import gemm_peak, machine  # noqa: E402
from benchmarks.workloads import image_task, workloads  # noqa: E402
from stabkit.config.taskoptions import TaskOptions  # noqa: E402
from stabkit.engine import conv, forms, grouped  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402
from stabkit.run.preflight import resolve_device  # noqa: E402


def cases(device: str, scale: float) -> dict:
    w = workloads(scale, device)
    c = lambda n: max(2, int(round(n * scale)))  # noqa: E731 (a size scaler)
    return {
        "W2": (w["W2"].config(8), w["W2"].task()),
        "W4": (w["W4"].config(8), w["W4"].task()),
        "W5": (w["W5"].config(2).replace(clients_per_round=c(10), batch_size=c(50), task_options=TaskOptions(
            clients=c(12), heldout_clients=6, samples_per_client=c(100))),
               image_task(c(12), c(100), (3, 32, 32))),
    }


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, reps: int) -> float:
    """Median seconds of ``fn`` (synchronised host clock), after one warm-up call."""
    fn()
    sync()
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - start)
    return float(np.median(out))


def kernel_share(fn) -> tuple:
    """(sum of CUDA kernel seconds, wall seconds, top kernels) of one call of ``fn``."""
    fn()
    sync()
    with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * torch.cuda.is_available()) as prof:
        start = time.perf_counter()
        fn()
        sync()
        wall = time.perf_counter() - start
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = sum(e.self_device_time_total for e in events) / 1e6
    top = sorted(events, key=lambda e: -e.self_device_time_total)[:8]
    return busy, wall, [(e.key[:90], e.self_device_time_total / 1e3, e.count) for e in top]


def step_inputs(run) -> tuple:
    """One local step's gradient arguments: every client model at the global model, random minibatches."""
    eng, model = run.engine, run.model
    R, s = eng.R, eng.s
    P = R * 2 * s
    theta = eng.x[:, :, None].expand(R, 2, s, model.d).reshape(P, model.d).clone()
    rows = torch.arange(P, device=theta.device) % eng.data.num_rows
    pos = (torch.rand(P, run.cfg.batch_size, device=theta.device) * eng.data.n[rows][:, None]).long()
    return (theta, *eng.data.gather(rows, pos))


@contextmanager
def env(name: str, value: str):
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name) if before is None else os.environ.__setitem__(name, before)


@contextmanager
def conv_layout(fmt):
    """Both fast paths' convolutions in memory format ``fmt`` for the block."""
    before = forms.conv_format
    forms.conv_format = lambda device: fmt
    try:
        yield
    finally:
        forms.conv_format = before


def gradient_variants(run, reps: int) -> dict:
    """Seconds of one ``FlatModel.grads`` call on one local step's shapes: eager, cudnn.benchmark,
    channels-last, graph replay (the engine's default on CUDA); and their largest difference from eager."""
    model = run.model
    theta, xb, yb = step_inputs(run)
    call = lambda: model.grads(theta, xb, yb)  # noqa: E731
    out = {}
    with env("STABKIT_CUDA_GRAPHS", "0"):
        ref = call()
        out["eager_s"] = timed(call, reps)
        torch.backends.cudnn.benchmark = True
        try:
            out["cudnn_benchmark_s"] = timed(call, reps)
            out["cudnn_benchmark_maxdiff"] = float((call() - ref).abs().max())
        finally:
            torch.backends.cudnn.benchmark = False
        with conv_layout(torch.channels_last):
            out["channels_last_s"] = timed(call, reps)
            out["channels_last_maxdiff"] = float((call() - ref).abs().max())
    if torch.cuda.is_available():
        out["graph_s"] = timed(call, reps)
        out["graph_maxdiff"] = float((call() - ref).abs().max())
        with conv_layout(torch.channels_last):
            model._graphed = None
            out["graph_channels_last_s"] = timed(call, reps)
        model._graphed = None
    return out


def small_map_variants(run, thresholds: list, reps: int) -> dict:
    """Seconds of the grouped path's gradient (eager) with convolutions of at most ``t`` output positions run
    as im2col + one bmm over the models (``conv.SMALL_MAP`` of this device), for each ``t``; Sequential models (W4) are
    run through the grouped form built from their module for this comparison."""
    fast = run.model.fast if isinstance(run.model.fast, grouped.GroupedModel) else \
        grouped.compile_grouped(run.model.module, run.model.kind)
    theta, xb, yb = step_inputs(run)
    ref = run.model.grads(theta, xb, yb)
    before, out = dict(conv.SMALL_MAP), {}
    device = theta.device.type
    try:
        for t in thresholds:
            conv.SMALL_MAP[device] = t
            try:
                out[f"small_map_{t}_s"] = timed(lambda: fast.grads(theta, xb, yb), reps)
                out[f"small_map_{t}_maxdiff"] = float((fast.grads(theta, xb, yb) - ref).abs().max())
            except torch.OutOfMemoryError:
                out[f"small_map_{t}_s"] = float("nan")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    finally:
        conv.SMALL_MAP.update(before)
    return out


def probe(name: str, cfg, task, peak: float, reps: int, thresholds: list = (), skip_variants: bool = False) -> dict:
    gpu = torch.cuda.is_available()
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    run = PairedRun(cfg, task=task)
    t = iter(range(10 ** 6))
    step = lambda: run.engine.step(next(t))  # noqa: E731
    round_s = timed(step, reps)
    with env("STABKIT_CUDA_GRAPHS", "0"):
        eager_round_s = timed(step, reps)
        busy_eager, wall_eager, _ = kernel_share(step)
    busy, wall, top = kernel_share(step)
    c = run.cfg
    fps = run.model.flops_per_sample(run.data.x[:1], run.data.y[:1])
    flops = 2 * c.pairs * c.sampled_clients * c.local_steps * c.batch_size * fps
    res = {"workload": name, "pairs": c.pairs, "clients": c.sampled_clients, "K": c.local_steps,
           "B": c.batch_size, "d": run.model.d, "round_s": round_s, "eager_round_s": eager_round_s,
           "busy_share_eager": busy_eager / wall_eager,
           "traj_rounds_per_s": 2 * c.pairs / round_s, "gflops": flops / round_s / 1e9,
           "peak_fraction": flops / round_s / 1e9 / peak, "kernel_busy_s": busy, "profiled_wall_s": wall,
           "busy_share": busy / wall, "top_kernels": top,
           "grad": {} if skip_variants else gradient_variants(run, reps), "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if gpu else 0.0}
    if not skip_variants:
        res["grad"]["gflops_eager"] = flops / c.local_steps / res["grad"]["eager_s"] / 1e9
    if thresholds and name in ("W4", "W5"):
        with env("STABKIT_CUDA_GRAPHS", "0"):
            res["grad"].update(small_map_variants(run, thresholds, reps))
    if name == "W2":
        base = PerClientLoop(cfg.replace(pairs=1), task)
        res["baseline_rounds_per_s"] = 1 / timed(base.round, reps)
        res["ratio_per_trajectory"] = res["traj_rounds_per_s"] / res["baseline_rounds_per_s"]
    if gpu:
        torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="W2,W4,W5")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run of this script's logic")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink every case (smoke run)")
    ap.add_argument("--small-map", default="", help="comma-separated conv.SMALL_MAP values to time (W4, W5)")
    ap.add_argument("--skip-variants", action="store_true", help="only the round (no gradient variants)")
    a = ap.parse_args()
    resolve_device(a.device)
    set_deterministic()  # as PairedRun.run does
    peak = gemm_peak(a.device)
    print(machine(), f"fp32 GEMM peak {peak:.0f} GFLOP/s", flush=True)
    results = []
    built = cases(a.device, a.scale)
    for name in a.only.split(","):
        cfg, task = built[name]
        res = probe(name, cfg, task, peak, a.reps, [int(v) for v in a.small_map.split(",") if v],
                    a.skip_variants)
        results.append(res)
        g = res["grad"]
        print(f"{name}: R={res['pairs']} s={res['clients']} K={res['K']} B={res['B']} round "
              f"{1e3 * res['round_s']:.1f} ms (eager {1e3 * res['eager_round_s']:.1f} ms), "
              f"{res['gflops']:.0f} GFLOP/s = {100 * res['peak_fraction']:.1f}% peak, GPU busy "
              f"{100 * res['busy_share']:.0f}% (eager {100 * res['busy_share_eager']:.0f}%), peak {res['peak_gpu_mb']:.0f} MB"
              + (f", loop {res['baseline_rounds_per_s']:.2f} r/s, ratio {res['ratio_per_trajectory']:.1f}x"
                 if "ratio_per_trajectory" in res else ""), flush=True)
        print("    grad ms: " + ", ".join(f"{k} {1e3 * v:.2f}" if k.endswith("_s") else f"{k} {v:.3g}"
                                         for k, v in g.items()))
        for k, ms, count in res["top_kernels"]:
            print(f"    {ms:8.2f} ms x{count:<4} {k}")
    out = Path(os.environ["OUT"]) / "gpu_probe.json" if os.environ.get("OUT") else \
        Path(__file__).with_name("results_gpu_probe.json")
    out.write_text(json.dumps({"machine": machine(), "gemm_peak_gflops": peak, "results": results}, indent=1))


if __name__ == "__main__":
    main()
