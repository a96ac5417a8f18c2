"""Flatness benchmarks (issue 15): lambda_max to 1 % and the Hutchinson trace with 100 probes for the digits
MLP and LeNet-5, and a 21 x 21 random-direction surface of the FedAvg CNN on 10,000 CIFAR-shaped samples.

    .venv/bin/python benchmarks/flatness.py                      # all three (the surface takes minutes)
    .venv/bin/python benchmarks/flatness.py --only mlp,lenet     # the seconds-scale part
    .venv/bin/python benchmarks/flatness.py --only surface --points 7   # a smaller grid (time scales with points^2)

Each model is first trained for a few FedAvg rounds (not measured at its random init). lambda_max: Lanczos
until the residual of lambda_max is below 1 % of it (the residual bounds the eigenvalue error), its error
checked against a tight reference run (tol 1e-6). Results: ``benchmarks/results_flatness.json``.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.workloads import image_task  # noqa: E402
from stabkit import RunConfig, TaskOptions  # noqa: E402
from stabkit.engine.threads import threads_for  # noqa: E402
from stabkit.flatness.hessian import hutchinson, lanczos  # noqa: E402
from stabkit.flatness.objective import Objective, training_objective  # noqa: E402
from stabkit.flatness.surfaces import Layers, random_plane  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402


def trained(cfg: RunConfig, task=None, rounds: int = 5) -> PairedRun:
    run = PairedRun(cfg, task)
    for t in range(rounds):
        run.engine.step(t)
    return run


def _timed_spectrum(obj, theta, probes: int):
    start = time.perf_counter()
    fast = lanczos(obj.hvp, theta, k=1, tol=1e-2)
    t_lanczos = time.perf_counter() - start
    start = time.perf_counter()
    tr = hutchinson(obj, theta, probes)
    return fast, t_lanczos, tr, time.perf_counter() - start


def spectrum_case(name: str, run: PairedRun, probes: int = 100, baseline_probes: int = 0) -> dict:
    """lambda_max and the trace on the grouped fast path; with ``baseline_probes`` also on the torch.func
    path in the same process (lambda_max in full, the trace on that many probes, scaled to ``probes``)."""
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed).select([0])
    theta = run.engine.x[0, :1]
    base = {}
    with threads_for(obj.flops):
        if baseline_probes:
            fast_path, run.model.fast = run.model.fast, None  # the torch.func HVP (and gradients)
            slow, t_slow, slow_tr, t_slow_tr = _timed_spectrum(obj, theta, baseline_probes)
            run.model.fast = fast_path
            base = {"baseline_lambda_max": float(slow.top[0, 0]), "baseline_lanczos_s": t_slow,
                    "baseline_lanczos_iterations": int(slow.iterations[0]), "baseline_trace_probes": baseline_probes,
                    "baseline_trace_s_scaled": t_slow_tr * probes / baseline_probes}
        fast, t_lanczos, tr, t_trace = _timed_spectrum(obj, theta, probes)
        ref = lanczos(obj.hvp, theta, k=1, max_iter=100, tol=1e-6)
    lam, exact = float(fast.top[0, 0]), float(ref.top[0, 0])
    out = {"model": name, "d": run.model.d, "samples": int(len(obj.x)), "lambda_max": lam,
           "lambda_max_reference": exact, "relative_error": abs(lam - exact) / abs(exact),
           "lanczos_iterations": int(fast.iterations[0]), "lanczos_s": t_lanczos,
           "trace": float(tr.mean[0]), "trace_se": float(tr.se[0]), "probes": probes, "trace_s": t_trace, **base}
    print(f"{name:8s} d={out['d']:6d} N={out['samples']:5d}  lambda_max {lam:.4g} (ref {exact:.4g}, error "
          f"{out['relative_error']:.1e}, {out['lanczos_iterations']} HVPs) {t_lanczos:6.2f} s   trace "
          f"{tr.mean[0]:.4g} ± {tr.se[0]:.2g} ({probes} probes) {t_trace:6.2f} s", flush=True)
    if base:
        print(f"{'':8s} torch.func path, same process: lambda_max {base['baseline_lambda_max']:.4g} "
              f"({base['baseline_lanczos_iterations']} HVPs) {base['baseline_lanczos_s']:6.2f} s   trace "
              f"{base['baseline_trace_s_scaled']:6.2f} s ({baseline_probes} probes timed, scaled to {probes})",
              flush=True)
    return out


def surface_case(points: int, samples: int) -> dict:
    clients = 20
    per = samples // clients
    task = image_task(clients, per, (3, 32, 32))
    cfg = RunConfig(task="synthetic", model="fedavg_cnn", pairs=1, clients_per_round=4, local_steps=2,
                    batch_size=min(50, per // 2), lr=0.05, constants=False, local_rounds=(), perturb="none",
                    task_options=TaskOptions(clients=clients, heldout_clients=6, samples_per_client=per))
    run = trained(cfg, task, rounds=2)
    obj = training_objective(run.model, run.data, run.nb, run.cfg.seed).select([0])
    keep = obj.w[0] > 0  # the population's 10,000 samples (held-out clients carry weight 0)
    train = Objective(run.model, obj.x[keep], obj.y[keep], obj.w[:, keep])
    layers = Layers(train, run.data.test_x, run.data.test_y)
    start = time.perf_counter()
    with threads_for(layers.flops):
        random_plane(layers, run.engine.x[0, 0], run.model.shapes, 0, points, 1.0)
    wall = time.perf_counter() - start
    out = {"model": "fedavg_cnn", "d": run.model.d, "train_samples": int(keep.sum()),
           "test_samples": len(run.data.test_y), "points": points, "surface_s": wall,
           "per_grid_point_s": wall / points ** 2, "extrapolated_21x21_s": wall / points ** 2 * 441}
    print(f"surface  fedavg_cnn d={out['d']} on {out['train_samples']} train + {out['test_samples']} test samples: "
          f"{points}x{points} in {wall:.1f} s ({out['per_grid_point_s']:.2f} s per point; 21x21 = "
          f"{out['extrapolated_21x21_s'] / 60:.1f} min)", flush=True)
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="mlp,lenet,surface")
    p.add_argument("--points", type=int, default=21)
    p.add_argument("--samples", type=int, default=10_000)
    p.add_argument("--probes", type=int, default=100)
    p.add_argument("--baseline-probes", type=int, default=0,
                   help="also time the torch.func HVP path (trace on this many probes, scaled)")
    p.add_argument("--out", default=str(Path(__file__).with_name("results_flatness.json")))
    a = p.parse_args(argv)
    only = set(a.only.split(","))
    load = os.getloadavg()[0]
    header = {"cpu_threads": torch.get_num_threads(), "torch": torch.__version__, "python": platform.python_version(),
              "load_average_at_start": load}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load average {load:.1f} at start")
    results = {"machine": header, "cases": []}
    if "mlp" in only:
        results["cases"].append(spectrum_case("mlp", trained(RunConfig(pairs=1, constants=False)), a.probes,
                                                      a.baseline_probes))
    if "lenet" in only:
        cfg = RunConfig(task="synthetic", model="lenet5", pairs=1, clients_per_round=10, local_steps=5,
                        batch_size=10, lr=0.05, constants=False,
                        task_options=TaskOptions(clients=20, heldout_clients=6, samples_per_client=100))
        results["cases"].append(spectrum_case("lenet5", trained(cfg, image_task(20, 100, (1, 28, 28))), a.probes,
                                                      a.baseline_probes))
    if "surface" in only:
        results["cases"].append(surface_case(a.points, a.samples))
    results["machine"]["load_average_at_end"] = os.getloadavg()[0]
    Path(a.out).write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
