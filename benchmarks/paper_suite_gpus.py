"""The paper suite's projected wall time on N GPUs (docs/cluster.md), in minutes on a CPU machine.

    .venv/bin/python benchmarks/paper_suite_gpus.py --gpus 8 [--data-dir DIR]

Every distinct job setting of ``stabkit atlas --suite paper`` (task, perturbation, pairs; FedAvg) is estimated on
this machine as ``stabkit pair --estimate`` estimates a run (``stabkit.run.estimate``: probes of a round and of
an evaluation, projected onto the whole run; fixture files of the real size where ``--data-dir`` lacks the data),
then carried over to a GPU with the round timings of ``benchmarks/results_gpu*.json`` / ``results_cuda_*.json``
(``stabkit.atlas.gpuplan``, the rows printed). ``stabkit atlas --suite paper --dry-run --gpus N`` projects the
same way from its own 2-round calibrations, which on a CPU include a full evaluation of every CIFAR-10 test
image by every model (about 20 min per setting on 2 cores); this script's probes take seconds. Every algorithm
is costed as FedAvg (SAM-type methods train about twice as long: a lower bound for them).

Writes ``benchmarks/results_paper_projection.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.run import machine  # noqa: E402
from stabkit.atlas.aliases import fold_aliases  # noqa: E402
from stabkit.atlas.gpuplan import describe, gpu_rows, project_on_gpus  # noqa: E402
from stabkit.atlas.runner import resolve_algos  # noqa: E402
from stabkit.atlas.suites import get_suite, suite_spec_dict  # noqa: E402
from stabkit.config.runconfig import RunConfig  # noqa: E402
from stabkit.run.estimate import estimate_run, with_fixture_data  # noqa: E402
from stabkit.sweep import parse_spec  # noqa: E402

OUT = Path(__file__).resolve().parent / "results_paper_projection.json"


def setting_part(config: dict) -> dict:
    """FedAvg's run at ``config``'s settings, estimated here: what the GPU projection scales."""
    cfg = RunConfig.from_dict(dict(config, algo="fedavg", hp={}))
    with tempfile.TemporaryDirectory(prefix="stabkit-paper-") as tmp:
        cfg, task, note = with_fixture_data(cfg, Path(tmp))
        from stabkit.run.experiment import PairedRun

        run = PairedRun(cfg, task)
        est = estimate_run(run)
        d = run.model.d
    return {"compute_s": est.total_s, "train_s": est.train_total_s, "fixed_s": 0.0, "d": d, "pairs": cfg.pairs,
            "clients": cfg.sampled_clients, "steps": cfg.local_steps, "rounds": cfg.rounds,
            "round_s": est.round_s, "eval_total_s": est.eval_total_s, "note": note}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    suite = get_suite("paper")
    names, _ = fold_aliases(resolve_algos(None))  # as the atlas measures them: an alias once
    jobs = parse_spec(suite_spec_dict(suite, names, args.data_dir)).jobs()
    settings: dict = {}
    for job in jobs:
        key = (job.config["task"], job.config["perturb"], job.config["pairs"])
        if key not in settings:
            settings[key] = setting_part(job.config)
            print(key, {k: v for k, v in settings[key].items() if k != "note"}, flush=True)
    parts = [settings[(j.config["task"], j.config["perturb"], j.config["pairs"])] for j in jobs]
    plan = project_on_gpus(parts, 0.0, args.gpus, 1.0, gpu_rows())
    lines = describe(plan, args.gpus, 1.0)
    cpu_h = sum(p["compute_s"] for p in parts) / 3600
    print(f"paper suite: {len(jobs)} jobs; {cpu_h:.0f} h of jobs on one CPU thread here")
    print("\n".join(lines))
    result = {"command": "python benchmarks/paper_suite_gpus.py " + " ".join(argv or sys.argv[1:]),
              "machine": machine(), "jobs": len(jobs), "cpu_hours_here": cpu_h, "gpus": args.gpus,
              "settings": {" ".join(map(str, k)): v for k, v in settings.items()},
              "projected_s": plan["total_s"], "gpu_job_seconds": sum(plan["per_job_s"]),
              "longest_job_s": max(plan["per_job_s"]), "rows": plan["rows"],
              "speedup": {str(d): f for d, f in plan["speedup"].items()}, "lines": lines}
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
