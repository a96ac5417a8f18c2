"""One short run that measures everything the GPU questions need (issue 37), prepared for a lent device.

    bash benchmarks/gpu_check.sh            # on the device: under 8 minutes
    python3 benchmarks/gpu_check.py --device cpu --scale 0.1 --no-estimates   # a smoke run of the logic

Prints, and writes to ``$OUT/gpu_check.json`` (else ``benchmarks/results_gpu_check.json``):

1. W4 (the FedAvg CNN at the FedSAGD CIFAR-10 preset's shape, 8 pairs) and W5 (ResNet-18-GN at the FedSWA
   preset's clients and batch, 2 pairs): the engine round and its share of the device's fp32 GEMM peak
   measured in this process, with TF32 off (stabkit's default) and on (where the device has it);
2. CPU == GPU: a 5-round FedAvg run on the digits MLP, in float64 on both (final models equal to 1e-10
   relative) and in float32 (the GPU's mean D_T inside the CPU's 95% interval over 8 pairs);
3. the ``--estimate`` lines of the ``fedsagd-cifar10`` and ``fedswa-cifar100`` presets (fixture data of the
   real shapes).
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.gpu_probe import cases, timed  # noqa: E402
from benchmarks.run import gemm_peak, machine  # noqa: E402
from stabkit import RunConfig, TaskOptions  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402
from stabkit.run.preflight import resolve_device  # noqa: E402

AGREEMENT = dict(task="digits", algo="fedavg", pairs=8, rounds=5, clients_per_round=4, local_steps=5,
                 batch_size=16, task_options=TaskOptions(clients=12), constants=False, local_rounds=())


def set_tf32(on: bool) -> None:
    """TF32 for CUDA matmuls and cuDNN convolutions (stabkit runs with both off)."""
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def peak_share(name: str, cfg, task, peaks: dict, reps: int) -> dict:
    """The engine round of ``cfg`` timed with TF32 off and (on CUDA) on, as GFLOP/s and share of the peak."""
    run = PairedRun(cfg, task=task)
    counter = iter(range(10 ** 6))
    c = run.cfg
    flops = 2 * c.pairs * c.sampled_clients * c.local_steps * c.batch_size * run.model.flops_per_sample(
        run.data.x[:1], run.data.y[:1])
    res = {"workload": name, "pairs": c.pairs, "clients": c.sampled_clients, "K": c.local_steps, "B": c.batch_size}
    for mode, peak in peaks.items():
        set_tf32(mode == "tf32")
        round_s = timed(lambda: run.engine.step(next(counter)), reps)
        res[mode] = {"round_s": round_s, "gflops": flops / round_s / 1e9, "peak_fraction": flops / round_s / peak / 1e9}
    set_tf32(False)
    return res


def final_models(device: str, dtype: str) -> torch.Tensor:
    """The global models ``[R, 2, d]`` after the agreement run on ``device``."""
    run = PairedRun(RunConfig(**AGREEMENT, device=device, dtype=dtype))
    for _ in range(AGREEMENT["rounds"]):
        run.step()
    return run.engine.x.detach().cpu().to(torch.float64)


def agreement(device: str) -> dict:
    """CPU against ``device``: float64 final models (relative max difference), float32 D_T intervals."""
    cpu64, dev64 = final_models("cpu", "float64"), final_models(device, "float64")
    rel = float((dev64 - cpu64).abs().max() / max(1.0, float(cpu64.abs().max())))
    d_cpu, d_dev = (np.linalg.norm((x[:, 0] - x[:, 1]).numpy(), axis=1)
                    for x in (final_models("cpu", "float32"), final_models(device, "float32")))
    half = 1.96 * d_cpu.std(ddof=1) / np.sqrt(len(d_cpu))
    return {"float64_max_rel_diff": rel, "float64_ok": rel <= 1e-10, "D_T_cpu": float(d_cpu.mean()),
            "D_T_cpu_half_width": float(half), "D_T_device": float(d_dev.mean()),
            "float32_ok": bool(abs(float(d_dev.mean()) - float(d_cpu.mean())) <= half)}


def estimates(device: str, timeout: float) -> dict:
    """The ``--estimate`` line of each paper preset, from the installed ``stabkit`` command."""
    out = {}
    for preset in ("fedsagd-cifar10", "fedswa-cifar100"):
        cmd = [sys.executable, "-m", "stabkit_cli", "presets", preset, "--estimate", "--pairs", "1",
               "--device", device]
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            text = (done.stdout + done.stderr).strip()
        except subprocess.TimeoutExpired:
            text = f"no answer in {timeout:.0f} s"
        out[preset] = {"seconds": time.perf_counter() - start, "output": text}
    return out


def report(results: dict) -> None:
    """Print the check's lines."""
    print(results["machine"], "peaks (GFLOP/s):", {k: round(v) for k, v in results["peaks"].items()})
    for r in results["workloads"]:
        print(f"{r['workload']}: R={r['pairs']} s={r['clients']} K={r['K']} B={r['B']}: " + ", ".join(
            f"{m} round {1e3 * v['round_s']:.1f} ms = {100 * v['peak_fraction']:.1f}% of {m} peak"
            for m, v in r.items() if isinstance(v, dict)))
    a = results["agreement"]
    print(f"CPU == device, float64: max relative difference {a['float64_max_rel_diff']:.2e} "
          f"({'ok' if a['float64_ok'] else 'FAILS'} at 1e-10); float32 D_T cpu {a['D_T_cpu']:.4f} "
          f"+- {a['D_T_cpu_half_width']:.4f}, device {a['D_T_device']:.4f} ({'ok' if a['float32_ok'] else 'OUTSIDE'})")
    for preset, e in results["estimates"].items():
        print(f"{preset} --estimate ({e['seconds']:.0f} s): {e['output']}")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink W4 and W5 (a smoke run)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-estimates", action="store_true", help="skip the presets' --estimate lines")
    ap.add_argument("--estimate-timeout", type=float, default=90.0)
    ap.add_argument("--json", default=None, help="where to write the results")
    a = ap.parse_args(argv)
    resolve_device(a.device)
    set_deterministic()  # as PairedRun.run does
    peaks = {"fp32": gemm_peak(a.device)}
    if a.device.startswith("cuda"):
        set_tf32(True)
        peaks["tf32"] = gemm_peak(a.device)
        set_tf32(False)
    built = cases(a.device, a.scale)
    results = {"machine": machine(), "peaks": peaks,
               "workloads": [peak_share(n, *built[n], peaks, a.reps) for n in ("W4", "W5")],
               "agreement": agreement(a.device),
               "estimates": {} if a.no_estimates else estimates(a.device, a.estimate_timeout)}
    report(results)
    out = Path(a.json) if a.json else Path(os.environ["OUT"]) / "gpu_check.json" if os.environ.get("OUT") else \
        Path(__file__).with_name("results_gpu_check.json")
    out.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
