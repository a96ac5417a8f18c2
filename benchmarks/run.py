"""Throughput benchmark of the paired engine against a per-client loop (issues 5, 20). One command:

    .venv/bin/python benchmarks/run.py [--only W1,W3] [--reps 3] [--threads 1,2] [--device cpu] [--json benchmarks/results.json]

Each workload (``benchmarks/workloads.py``) runs in its own process (so peak RSS is per workload). In
that process, at every thread count of ``--threads`` (1 and 2 by default), stabkit at every pair count and
the baseline (``benchmarks/baseline.py``) are timed alternately, ``--reps`` times, and medians are reported;
the ratio of a row is against the baseline at *its best* thread count, measured in the same process (the
honest anchor: a per-client loop is often fastest on one thread). stabkit's engine takes the thread count
as its cap (its policy keeps tiny ops on one thread, ``stabkit.engine.threads``). The fp32 GEMM peak is
measured at each thread count in the same process, before the first repetition and after every one, and
each row's %peak is against the best of them at its own thread count (the VM's vCPUs change speed from minute
to minute: single probes in one run ranged 85-145 GFLOP/s, so one early probe could halve or double a
%peak). FLOPs are counted analytically from the op shapes (``FlatModel.flops_per_sample``). Under each
workload, the gradient alone: one minibatch gradient of all the largest pair count's client models on random
inputs, as % of the peak -- the ceiling of the round's %peak with these kernels (the engine's own work,
sampling, the update, averaging, comes on top). Prints a table and
writes JSON. Not part of the test suite (a tiny ``--scale`` smoke run is).
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.baseline import PerClientLoop  # noqa: E402
from benchmarks.workloads import workloads  # noqa: E402
from stabkit.engine.determinism import set_deterministic  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402
from stabkit.store.atomic import atomic_write_json  # noqa: E402


def gemm_peak(device: str, threads: int = 1, reps: int = 5) -> float:
    """Best fp32 GEMM GFLOP/s measured now: on the CPU at ``threads`` threads (n=1024), on a GPU with
    n=8192 (TF32 off, torch's default)."""
    n = 8192 if device.startswith("cuda") else 1024
    best, default = 0.0, torch.get_num_threads()
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    if n == 1024:
        torch.set_num_threads(threads)
    torch.mm(a, b)
    for _ in range(reps):
        sync()
        start = time.perf_counter()
        torch.mm(a, b)
        sync()
        best = max(best, 2 * n ** 3 / (time.perf_counter() - start) / 1e9)
    torch.set_num_threads(default)
    return best


def sync():
    """Wait for queued GPU work, so wall-clock timings include it (no-op on the CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn, rounds: int) -> float:
    """Seconds per call of ``fn`` over ``rounds`` calls."""
    sync()
    start = time.perf_counter()
    for _ in range(rounds):
        fn()
    sync()
    return (time.perf_counter() - start) / rounds


class Stepper:
    """Advances a built PairedRun round by round; optionally times evaluation after each round."""

    def __init__(self, run: PairedRun):
        self.run, self.t, self.rec = run, 0, None
        self.eval_s: list = []

    def step(self):
        self.rec = self.run.engine.step(self.t)
        self.t += 1

    def step_and_eval(self):
        self.step()
        sync()
        start = time.perf_counter()
        self.run.evaluator.evaluate(self.run.engine.x, self.rec.rows)
        sync()
        self.eval_s.append(time.perf_counter() - start)


def eval_knobs(w, task, reps: int, row: dict) -> dict:
    """Evaluation share of run time at the largest pair count with the cheaper-evaluation knobs:
    ``--eval-every N`` (one evaluation per N rounds) and ``--eval-fraction f`` (a fixed subset)."""
    out = {f"eval_every_{n}": row["eval_s"] / (row["eval_s"] + n * row["round_s"]) for n in (2, 5, 10)}
    for f in EVAL_FRACTIONS:
        s = Stepper(PairedRun(w.config(max(w.pairs)).replace(eval_fraction=f), task=task))
        for _ in range(reps * w.rounds + 1):
            s.step_and_eval()
        eval_s = float(np.median(s.eval_s[1:]))
        out[f"eval_fraction_{f}"] = eval_s / (eval_s + row["round_s"])
    return out


EVAL_FRACTIONS = (0.5, 0.25, 0.1)


def fit_exponent(xs, ys) -> float:
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def scaling(w, task, reps: int, rounds: int) -> dict:
    """Round time at ``w.scaling_pairs`` pairs vs clients per round and vs K (``w.scaling``), log-log slope."""
    base = w.config(w.scaling_pairs)
    out = {}
    for field in ("clients_per_round", "local_steps"):
        values = w.scaling
        steppers = [Stepper(PairedRun(base.replace(**{field: v}), task=task)) for v in values]
        for s in steppers:
            s.step()
        times = [[timed(s.step, rounds) for s in steppers] for _ in range(reps)]
        med = np.median(np.array(times), axis=0)
        out[field] = {"values": list(values), "round_s": med.tolist(), "exponent": fit_exponent(values, med),
                      "pairs": w.scaling_pairs}
    return out


def measure(name: str, scale: float, reps: int, device: str, thread_counts: tuple = (1, 2)) -> dict:
    """Everything reported for one workload (runs in its own process)."""
    w = workloads(scale, device)[name]
    task = w.task()
    set_deterministic()  # as PairedRun.run does
    if device.startswith("cuda"):
        thread_counts = (torch.get_num_threads(),)  # the host threads hardly matter on a GPU
    peaks = {n: gemm_peak(device, n) for n in thread_counts}
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()  # the GEMM's 800 MB are not the workload's
    runs = {R: Stepper(PairedRun(w.config(R), task=task)) for R in w.pairs}
    cfg = w.config(1)
    any_run = next(iter(runs.values())).run
    fps = any_run.model.flops_per_sample(any_run.data.x[:1], any_run.data.y[:1])
    contestants = {(f"stabkit_{R}", n): (_at_threads(n, s, s.step_and_eval if w.evaluate else s.step), s)
                   for n in thread_counts for R, s in runs.items()}
    if w.baseline:
        base = PerClientLoop(cfg, task)
        contestants.update({("baseline", n): (_at_threads(n, None, base.round), None) for n in thread_counts})
    for fn, _ in contestants.values():  # warm-up round
        fn()
    times = {k: [] for k in contestants}
    evals = {k: [] for k in contestants}  # evaluation seconds of the rounds timed under each key
    for _ in range(reps):
        for k, (fn, stepper) in contestants.items():
            if stepper is not None:
                stepper.eval_s.clear()
            times[k].append(timed(fn, w.rounds))
            if stepper is not None:
                evals[k].extend(stepper.eval_s)
        if not device.startswith("cuda"):  # re-probed between repetitions: the best one counts
            peaks = {n: max(p, gemm_peak(device, n)) for n, p in peaks.items()}
    result = {"workload": name, "description": w.description, "d": any_run.model.d,
              "flops_per_sample": fps, "gemm_peak_gflops": max(peaks.values()),
              "gemm_peak_by_threads": {str(n): p for n, p in peaks.items()}, "rows": []}
    if w.baseline:
        base_rps = {n: float(np.median(1 / np.array(times[("baseline", n)]))) for n in thread_counts}
        best_n = max(base_rps, key=base_rps.get)
        result["baseline_rounds_per_s"] = {str(n): v for n, v in base_rps.items()}
        result["baseline_best_threads"] = best_n
    for n in thread_counts:
        for R, s in runs.items():
            c = s.run.cfg
            per_round = np.array(times[(f"stabkit_{R}", n)])
            eval_s = float(np.median(evals[(f"stabkit_{R}", n)])) if evals[(f"stabkit_{R}", n)] else 0.0
            step_s = per_round - eval_s  # the timed calls include evaluation where it is measured
            row = {"pairs": R, "threads": n, "round_s": float(np.median(step_s)),
                   "rounds_per_s": float(np.median(1 / step_s)),
                   "traj_rounds_per_s": float(np.median(2 * R / step_s)),
                   "client_steps_per_s": float(np.median(2 * R * c.sampled_clients * c.local_steps / step_s)),
                   "eval_s": eval_s, "eval_fraction": eval_s / (eval_s + float(np.median(step_s)))}
            row["gflops"] = row["client_steps_per_s"] * c.batch_size * fps / 1e9
            row["peak_fraction"] = row["gflops"] / peaks[n]
            if w.baseline:
                b = np.array(times[("baseline", best_n)])
                row["baseline_rounds_per_s"] = base_rps[best_n]
                row["baseline_threads"] = best_n
                row["ratio"] = float(np.median(b * 2 * R / step_s))  # traj-rounds/s over best baseline r/s, per rep
            result["rows"].append(row)
    big = runs[max(runs)].run
    result["gradient_alone"] = {"pairs": big.cfg.pairs, **{str(n): gradient_alone(big, fps, reps, n, peaks[n])
                                                            for n in thread_counts}}
    if w.scaling:
        with _threads(max(thread_counts)):
            result["scaling"] = scaling(w, task, reps, max(2, w.rounds // 4))
    if w.evaluate:
        with _threads(max(thread_counts)):
            result["eval_knobs"] = eval_knobs(w, task, reps, result["rows"][-1])
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if device.startswith("cuda"):
        result["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2 ** 20
    return result


def gradient_inputs(run: PairedRun) -> tuple:
    """``(theta, x, y)`` of one local step's gradient of all the round's client models: ``2 R s`` models at the
    global model, B random inputs of the task's shape each (seeded)."""
    cfg, x0 = run.cfg, run.engine.x
    P = 2 * cfg.pairs * cfg.sampled_clients
    theta = x0[:, :, None].expand(-1, -1, cfg.sampled_clients, -1).reshape(P, -1).contiguous()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn((P, cfg.batch_size, *run.task.input_shape), generator=gen).to(x0)
    y = torch.randint(0, run.task.num_classes, (P, cfg.batch_size), generator=gen).to(x0.device)
    return theta, x, y


def gradient_alone(run: PairedRun, fps: float, reps: int, threads: int, peak: float) -> dict:
    """One minibatch gradient of all the round's client models (:func:`gradient_inputs`) at ``threads``
    threads, median of ``reps``: the ceiling of the round's %peak with these kernels -- an engine costing
    nothing besides its gradients would run K of these per round."""
    theta, x, y = gradient_inputs(run)
    with _threads(threads):
        run.model.grads(theta, x, y)  # warm-up
        seconds = float(np.median([timed(lambda: run.model.grads(theta, x, y), 1) for _ in range(max(3, reps))]))
    gflops = fps * x.shape[0] * x.shape[1] / seconds / 1e9
    return {"s": seconds, "gflops": gflops, "peak_fraction": gflops / peak}


@contextmanager
def _threads(n: int):
    """torch's intra-op threads set to n for the block."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _at_threads(n: int, stepper, fn):
    """``fn`` run with n intra-op threads; a stabkit stepper's engine takes n as its cap for large ops."""
    def call():
        if stepper is not None:
            stepper.run.engine.threads = n
        with _threads(n):
            fn()
    return call


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import os
    gpu = f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (f"{cpu}, {os.cpu_count()} cores{gpu}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start")


def table(results: list) -> str:
    head = (f"{'':<3} {'pairs':>5} {'thr':>3} {'rounds/s':>9} {'traj-r/s':>9} {'base r/s':>13} {'ratio':>6} "
            f"{'cl-steps/s':>10} {'GFLOP/s':>8} {'%peak':>6} {'eval%':>6} {'RSS MB':>7}")
    lines = [head]
    for res in results:
        for row in res["rows"]:
            base = row.get("baseline_rounds_per_s")
            base_text = '-' if base is None else f"{base:.3g} ({row['baseline_threads']}t)"
            lines.append(
                f"{res['workload']:<3} {row['pairs']:>5} {row.get('threads', '-'):>3} {row['rounds_per_s']:>9.3g} "
                f"{row['traj_rounds_per_s']:>9.3g} {base_text:>13} "
                f"{'-' if base is None else format(row['ratio'], '.1f') + 'x':>6} "
                f"{row['client_steps_per_s']:>10.4g} {row['gflops']:>8.3g} {100 * row['peak_fraction']:>5.1f}% "
                f"{'-' if not row['eval_s'] else format(100 * row['eval_fraction'], '.0f') + '%':>6} "
                f"{res['peak_rss_mb']:>7.0f}")
    for res in results:
        peaks = res.get("gemm_peak_by_threads", {})
        peak_text = (", ".join(f"{p:.1f} ({n}t)" for n, p in peaks.items()) if peaks
                     else f"{res['gemm_peak_gflops']:.1f}")
        base_text = ""
        if "baseline_rounds_per_s" in res:
            base_text = ("; baseline r/s " + ", ".join(f"{v:.3g} ({n}t)" for n, v in res["baseline_rounds_per_s"].items()))
        lines.append(f"{res['workload']}: {res['description']}; d={res['d']}, "
                     f"{res['flops_per_sample'] / 1e6:.3g} MFLOP/sample (fwd+bwd), "
                     f"GEMM peak {peak_text} GFLOP/s{base_text}"
                     + (f", peak GPU memory {res['peak_gpu_mb']:.0f} MB" if "peak_gpu_mb" in res else ""))
        if "eval_knobs" in res:
            lines.append("    evaluation share at the largest pair count: every round "
                         f"{100 * res['rows'][-1]['eval_fraction']:.0f}%, "
                         + ", ".join(f"--{k.replace('_', '-').rsplit('-', 1)[0]} {k.rsplit('_', 1)[1]} {100 * v:.0f}%"
                                     for k, v in res["eval_knobs"].items()))
        if "gradient_alone" in res:
            ga = res["gradient_alone"]
            lines.append(f"    the gradient alone ({ga['pairs']} pairs' clients x B, the round's ceiling): "
                         + ", ".join(f"{1e3 * v['s']:.3g} ms = {100 * v['peak_fraction']:.1f}% of peak ({n}t)"
                                     for n, v in ga.items() if n != "pairs"))
        for field, sc in res.get("scaling", {}).items():
            lines.append(f"    round time vs {field} {sc['values']} ({sc['pairs']} pairs): "
                         f"exponent {sc['exponent']:.2f} "
                         f"({', '.join(f'{1e3 * t:.1f}' for t in sc['round_s'])} ms)")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="W1,W2,W3,W4,W5", help="comma-separated workloads")
    ap.add_argument("--reps", type=int, default=3, help="alternating repetitions (median reported)")
    ap.add_argument("--scale", type=float, default=1.0, help="shrink every workload (smoke test)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", default="1,2", help="comma-separated intra-op thread counts, both sides")
    ap.add_argument("--json", default="benchmarks/results.json")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: measure one workload
    args = ap.parse_args(argv)
    if args.one:
        threads = tuple(int(n) for n in args.threads.split(","))
        print(json.dumps(measure(args.one, args.scale, args.reps, args.device, threads)))
        return
    results = []
    for name in args.only.split(","):
        cmd = [sys.executable, __file__, "--one", name, "--scale", str(args.scale), "--reps", str(args.reps),
               "--device", args.device, "--threads", args.threads]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"workload {name} failed:\n{done.stderr[-3000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"{name} done", file=sys.stderr)
    report = {"machine": machine(), "results": results}
    print(report["machine"])
    print(table(results))
    atomic_write_json(Path(args.json), report)


if __name__ == "__main__":
    main()
