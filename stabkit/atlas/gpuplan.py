"""Projected wall time of a sweep's jobs on N GPUs (``stabkit atlas --dry-run --gpus N``, ``stabkit sweep
--estimate --gpus N``): the calibration on the machine at hand (:mod:`stabkit.atlas.estimate`) carried over to
a GPU with the throughput figures the repository's GPU benchmarks measured (``benchmarks/results_gpu*.json``,
``benchmarks/results_cuda_*.json``, written by ``benchmarks/gpu_probe.py`` and ``benchmarks/run.py`` on a GPU).

For each job the benchmark rows of the nearest model size (parameters d, on a log scale) give the GPU's seconds
per local step of pairs x clients models, interpolated to the job's (:func:`gpu_round_seconds`), times its
local steps and rounds. The job's training *and* evaluation on the GPU take the calibrated time here
divided by the speed-up that gives on training (never below 1: a job the GPU would not speed up keeps its time
here); its fixed cost (start-up, constants) stays as measured here.
N GPUs holding ``gpus_per_job`` each run the jobs' sum divided by N (packing several jobs on one GPU hides
launch latency but adds no arithmetic: not counted), and never less than the longest job. Reading the jobs for
the page is added as measured here. A central estimate, not a bound; its sources are printed with it.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Optional

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"  # a source checkout's benchmark results
PATTERNS = ("results_gpu*.json", "results_cuda_*.json")


def gpu_rows(folder: Path = BENCHMARKS) -> list:
    """Every GPU round timing in the benchmark results under ``folder``: ``{"source", "machine", "what", "d",
    "pairs", "clients", "steps", "round_s"}`` (none where the folder or the files are absent)."""
    rows = []
    for path in sorted({p for pattern in PATTERNS for p in folder.glob(pattern)}):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        machine = str(data.get("machine", "?")).split(",")[:3]
        for result in data.get("results") or []:
            if not isinstance(result, dict) or not result.get("d"):
                continue
            what = f"{result.get('workload', '')} {result.get('description', '')}".strip()
            clients = result.get("clients") or _read(what, r"\bs=(\d+)") or _read(what, r"x (\d+) clients")
            steps = result.get("K") or _read(what, r"\bK=(\d+)")
            for row in result.get("rows") or [result]:
                if clients and steps and row.get("round_s") and row.get("pairs"):
                    rows.append({"source": f"benchmarks/{path.name}", "machine": ",".join(machine).strip(),
                                 "what": what, "d": int(result["d"]),
                                 "pairs": int(row["pairs"]), "clients": int(clients), "steps": int(steps),
                                 "round_s": float(row["round_s"])})
    return rows


def _read(text: str, pattern: str) -> Optional[int]:
    """The integer ``pattern``'s group finds in a benchmark's description (``s=4``, ``K=2``), or None."""
    match = re.search(pattern, text)
    return int(match.group(1)) if match else None


def rows_of_size(d: int, rows: list) -> list:
    """The rows of the model size nearest ``d`` (log scale)."""
    size = min(rows, key=lambda r: abs(math.log(r["d"] / d)))["d"]
    return [r for r in rows if r["d"] == size]


def gpu_round_seconds(job: dict, rows: list) -> tuple:
    """``(seconds, rows used)``: a round of ``job`` (``pairs``, ``clients``, ``steps``) on the benchmark's GPU.

    A local step of b = pairs x clients models takes, from the rows' steps (their round over their steps): between
    two measured b, the log-log interpolation of the two (a GPU's step grows less than linearly with b); above the
    largest, that row's time scaled linearly (pessimistic); below the smallest, that row's time (a smaller batch
    is not assumed faster). The job's steps run one after another."""
    points = sorted({(r["pairs"] * r["clients"], r["round_s"] / r["steps"]): r for r in rows}.items())
    b = job["pairs"] * job["clients"]
    below = [p for p in points if p[0][0] <= b]
    above = [p for p in points if p[0][0] >= b]
    if below and above:
        (b0, t0), r0 = below[-1]
        (b1, t1), r1 = above[0]
        step = t0 if b1 == b0 else t0 * (b / b0) ** (math.log(t1 / t0) / math.log(b1 / b0))
        used = [r0] if r0 is r1 else [r0, r1]
    elif below:
        (b0, t0), r0 = below[-1]
        step, used = t0 * b / b0, [r0]
    else:
        (b1, t1), r1 = above[0]
        step, used = t1, [r1]
    return step * job["steps"], used


def project_on_gpus(parts: list, reading_s: float, gpus: int, gpus_per_job: float, rows: list) -> dict:
    """``{"total_s", "per_job_s", "rows": the benchmark rows used, "speedup": {d: training speed-up}}`` for the
    jobs ``parts`` (from :func:`stabkit.atlas.estimate.projected_seconds`) on ``gpus`` GPUs."""
    used, speedup, per_job = {}, {}, []
    for job in parts:
        round_s, by = gpu_round_seconds(job, rows_of_size(job["d"], rows))
        used.update({(r["source"], r["what"], r["pairs"]): r for r in by})
        gpu_train = round_s * job["rounds"]
        factor = job["train_s"] / gpu_train if gpu_train > 0 else 1.0
        speedup.setdefault(job["d"], factor)
        per_job.append(job["fixed_s"] + (job["compute_s"] - job["fixed_s"]) / max(factor, 1.0))
    slots = max(1, gpus // gpus_per_job) if gpus_per_job >= 1 else gpus  # packing adds no arithmetic
    compute = max(sum(per_job) / slots, max(per_job, default=0.0))
    return {"total_s": compute + reading_s, "per_job_s": per_job, "rows": list(used.values()), "speedup": speedup}


def describe(plan: dict, gpus: int, gpus_per_job: float) -> list:
    """The lines printed with a GPU projection: the total and every figure it rests on."""
    from stabkit.run.estimate import _duration

    lines = [f"on {gpus} GPU(s) at {gpus_per_job:g} GPU per job: projected {_duration(plan['total_s'])} "
             f"({_duration(sum(plan['per_job_s']))} of jobs in all; the longest "
             f"{_duration(max(plan['per_job_s'], default=0))}), from these GPU round timings:"]
    for row in plan["rows"]:
        lines.append(f"  {row['source']} ({row['machine']}): {row['what']}, d = {row['d']:,}, {row['pairs']} "
                     f"pair(s), {row['clients']} clients x {row['steps']} local steps: {row['round_s'] * 1e3:.2f} "
                     f"ms a round")
    lines.append("  training speed-up over this machine by model size: " + ", ".join(
        f"d = {d:,}: {f:.3g}x" for d, f in sorted(plan["speedup"].items())))
    return lines


def projection_lines(est: dict, gpus: int, gpus_per_job: Optional[float], folder: Path = BENCHMARKS) -> list:
    """The lines that project ``est`` (:func:`stabkit.atlas.estimate.projected_seconds`) onto ``gpus`` GPUs, or
    the one line saying that no GPU figures were found."""
    rows = gpu_rows(folder)
    if not rows:
        return [f"no GPU projection: no GPU benchmark results ({', '.join(PATTERNS)}) under {folder}"]
    if any(math.isnan(p["compute_s"]) or not p["d"] for p in est["parts"]):
        return ["no GPU projection: a calibration here failed (see above)"]
    share = 1.0 if gpus_per_job is None else gpus_per_job
    return describe(project_on_gpus(est["parts"], est["reading_s"], gpus, share, rows), gpus, share)
