"""Leave-one-out stability and unlearning against the exact coupled retrain (docs/unlearning.md).

    python figures/recipes/unlearning.py [--out runs/recipes/unlearning] [--floor-seeds 8]

For each task (the small suite's digits MLP and Synthetic(1,1) logistic: 20 clients, s = 5, K = 10, B = 16,
η_l = 0.05, T = 100, seed 0; 8 pairs, 32 for the
sample-level neighbours) and algorithm (FedAvg, FedProx, SCAFFOLD) it runs, each as the
``stabkit`` command printed beside it:

* ``stabkit pair --perturb remove-client --store-updates`` (B = the exact retrain without client i*_r) and the
  replace-one neighbours of the same i*_r / (i*_r, j*_r): ``--perturb client --client-mode population`` and
  ``--perturb sample``, with ``--perturb remove-sample``;
* ``stabkit unlearn RUN --method M --hp ... --format json`` for every method and budget of ``BUDGETS``, and
  the retraining noise floor once per run (``--method none --floor-seeds 8``).

Writes ``results.json`` (every report and D_T) and ``distance_vs_steps.png`` into ``figures/recipes/unlearning/``
and prints the tables docs/unlearning.md shows.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from stabkit import RunConfig, load_run, run_pair
from stabkit.unlearn import unlearn

HERE = Path(__file__).resolve().parent / "unlearning"
SMALL = dict(clients=20, participation=0.25, local_steps=10, batch_size=16, lr=0.05, rounds=100, pairs=8,
             eval_every=10, checkpoint_every=0, constants=False)
TASKS = {"digits": dict(task="digits", model="mlp"), "synthetic": dict(task="synthetic", model="logistic")}
ALGOS = ("fedavg", "fedprox", "scaffold")
BUDGETS = [("none", {}), ("finetune", {"rounds": 1}), ("finetune", {"rounds": 3}), ("finetune", {"rounds": 10}),
           ("finetune", {"rounds": 30}), ("gradient-ascent", {"steps": 10, "radius": 0.1}),
           ("gradient-ascent", {"steps": 50, "radius": 0.5}), ("federaser", {"interval": 5}),
           ("federaser", {"interval": 2}), ("federaser", {"interval": 1, "ratio": 1.0})]
PERTURBS = {"remove-client": dict(perturb="remove-client", store_updates=True),
            "replace-client": dict(perturb="client", client_mode="population"),
            "remove-sample": dict(perturb="remove-sample", pairs=32), "replace-sample": dict(perturb="sample", pairs=32)}
# 32 pairs under the sample-level neighbours, as the atlas takes: their D_T varies far more between pairs


def command(task: str, algo: str, perturb: str, out: Path) -> str:
    flags = {**SMALL, **TASKS[task], **PERTURBS[perturb], "algo": algo}
    parts = []
    for k, v in flags.items():
        if v is True:
            parts.append(f"--{k.replace('_', '-')}")
        elif v is False:
            parts.append(f"--no-{k.replace('_', '-')}")
        else:
            parts.append(f"--{k.replace('_', '-')} {v}")
    return f"stabkit pair {' '.join(parts)} --out {out}"


def final_disc(run_dir: Path) -> list:
    df = load_run(run_dir)
    return df[df["round"] == df["round"].max()].sort_values("pair")["disc"].tolist()


def main(out: Path, floor_seeds: int) -> dict:
    results = {}
    for task in TASKS:
        for algo in ALGOS:
            key = f"{task}/{algo}"
            entry = results[key] = {"disc": {}, "commands": {}, "methods": []}
            for perturb in PERTURBS:
                run_dir = out / task / algo / perturb
                cfg = RunConfig.from_dict({**SMALL, **TASKS[task], **PERTURBS[perturb], "algo": algo})
                if not (run_dir / "summary.json").is_file():
                    run_pair(cfg, out=run_dir, overwrite=True)
                entry["disc"][perturb] = final_disc(run_dir)
                entry["commands"][perturb] = command(task, algo, perturb, run_dir)
            run_dir = out / task / algo / "remove-client"
            for method, hp in BUDGETS:
                seeds = floor_seeds if method == "none" else None
                report = unlearn(run_dir, method, hp, seeds)
                hp_args = "".join(f" --hp {k}={v}" for k, v in hp.items())
                report["command"] = (f"stabkit unlearn {run_dir} --method {method}{hp_args}"
                                     + (f" --floor-seeds {seeds}" if seeds else "") + " --format json")
                entry["methods"].append(report)
                print(key, method, hp, f"{np.mean([p['distance_to_retrain'] for p in report['pairs']]):.4g}",
                      flush=True)
    HERE.mkdir(parents=True, exist_ok=True)
    (HERE / "results.json").write_text(json.dumps(results, indent=1))
    figure(results, HERE / "distance_vs_steps.png")
    print(tables(results))
    return results


def _summary(report: dict, floor: np.ndarray) -> dict:
    p = report["pairs"]
    d = np.array([r["distance_to_retrain"] for r in p])
    return {"dist": d.mean(), "dist_se": d.std(ddof=1) / np.sqrt(len(d)), "units": (d / floor).mean(),
            "steps": np.mean([r["client_steps"] for r in p]), "retrain": p[0]["retrain_client_steps"],
            "forg": np.mean([r["forgotten_acc"] for r in p]), "forg_rt": np.mean([r["forgotten_acc_retrain"] for r in p]),
            "test": np.mean([r["test_acc"] for r in p]), "test_rt": np.mean([r["test_acc_retrain"] for r in p])}


def _label(report: dict) -> str:
    hp = {k: v for k, v in report["hp"].items() if v is not None}
    return report["method"] + (" " + ",".join(f"{k}={v:g}" for k, v in hp.items()) if hp else "")


def tables(results: dict) -> str:
    lines = []
    lines.append("| task / algorithm | remove-client D_T (± s.e.) | replace-client D_T | ratio | remove-sample D_T | "
                 "replace-sample D_T | ratio |")
    lines.append("|---|---|---|---|---|---|---|")
    for key, e in results.items():
        dc = {k: np.mean(v) for k, v in e["disc"].items()}
        se = {k: np.std(v, ddof=1) / np.sqrt(len(v)) for k, v in e["disc"].items()}
        cells = [f"{dc[k]:.4f} ± {se[k]:.4f}" for k in PERTURBS]
        lines.append(f"| {key} | {cells[0]} | {cells[1]} | {dc['replace-client'] / dc['remove-client']:.2f} | "
                     f"{cells[2]} | {cells[3]} | {dc['replace-sample'] / dc['remove-sample']:.2f} |")
    lines.append("")
    for key, e in results.items():
        floor = np.array([p["floor"] for p in e["methods"][0]["pairs"]])
        lines.append(f"**{key}** (floor {floor.mean():.4f} ± {floor.std(ddof=1):.4f} over pairs)")
        lines.append("")
        lines.append("| method | ‖x_u − x_T^B‖ (± s.e.) | in floor units | client steps (retrain) | forgotten acc "
                     "(retrain) | test acc (retrain) |")
        lines.append("|---|---|---|---|---|---|")
        for report in e["methods"]:
            s = _summary(report, floor)
            lines.append(f"| {_label(report)} | {s['dist']:.4f} ± {s['dist_se']:.4f} | {s['units']:.2f} | "
                         f"{s['steps']:.0f} ({s['retrain']:.0f}) | {s['forg']:.3f} ({s['forg_rt']:.3f}) | "
                         f"{s['test']:.3f} ({s['test_rt']:.3f}) |")
        lines.append("")
    return "\n".join(lines)


def figure(results: dict, path: Path) -> None:
    from stabkit.plotting import plt

    keys = list(results)
    fig, axes = plt.subplots(2, 3, figsize=(13, 7.5), sharex=True)
    colors = {"finetune": "C0", "gradient-ascent": "C3", "federaser": "C2"}
    for ax, key in zip(axes.flat, keys):
        e = results[key]
        floor = np.array([p["floor"] for p in e["methods"][0]["pairs"]])
        ax.axhspan(floor.mean() - floor.std(ddof=1), floor.mean() + floor.std(ddof=1), color="0.85",
                   label="retraining floor (mean ± sd)")
        ax.axhline(floor.mean(), color="0.6", lw=0.8)
        for method, color in colors.items():
            pts = [_summary(r, floor) for r in e["methods"] if r["method"] == method]
            pts.sort(key=lambda s: s["steps"])
            ax.errorbar([s["steps"] for s in pts], [s["dist"] for s in pts], yerr=[s["dist_se"] for s in pts],
                        marker="o", color=color, label=method, capsize=2, lw=1)
        none = _summary(e["methods"][0], floor)
        ax.errorbar([1], [none["dist"]], yerr=[none["dist_se"]], marker="*", ms=12, color="k", ls="none",
                    label="doing nothing (plotted at 1 step)")
        ax.axvline(none["retrain"], color="k", ls="--", lw=0.8, label="retrain's cost")
        ax.set(xscale="log", yscale="log", title=key, xlabel="client gradient steps", ylabel=r"$\|x_u - x_T^B\|$")
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("Distance to the exact coupled retrain against cost (8 pairs, mean ± s.e.)")
    fig.tight_layout()
    fig.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/recipes/unlearning", type=Path)
    parser.add_argument("--floor-seeds", default=8, type=int)
    parser.add_argument("--tables", action="store_true", help="print the tables of the saved results.json only")
    args = parser.parse_args()
    if args.tables:
        print(tables(json.loads((HERE / "results.json").read_text())))
    else:
        main(args.out, args.floor_seeds)
