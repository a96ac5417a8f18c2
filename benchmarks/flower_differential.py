"""The largest differences between each shipped Flower strategy (driven by the bridge) and what it was checked
against, for docs/flower.md's table: stabkit's own method on the same run (FedAvg, FedProx, FedAvgM: 5 rounds),
Flower's FedOpt forms computed by hand from the round's client models (FedAdam, FedYogi, FedAdagrad: 3 rounds),
and the aggregation rules computed by hand (robust aggregators, DP wrappers at noise 0: round 1). The
references are the test suite's (tests/algorithms/flower/test_flower.py); this script only reports the numbers the tests bound.
Each difference is max |x_flower - x_reference| / max |x_reference| over rounds, pairs and trajectories, in
float32 and float64. Usage (from the repository root):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/flower_differential.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stabkit import RunConfig  # noqa: E402
from stabkit.algorithms.flower.bridge import FlowerStrategy  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402
from tests.algorithms.flower.test_flower import REFERENCES, SMALL, _fedopt_by_hand  # noqa: E402

NATIVE = {"FedAvg": ({}, "fedavg", {}, {}), "FedProx": ({"proximal_mu": 0.3}, "fedprox", {"lam": 0.3}, {}),
          "FedAvgM": ({"server_momentum": 0.9, "server_learning_rate": 0.5}, "fedavgm", {"beta": 0.9},
                      {"global_lr": 0.5})}
FEDOPT = {"FedAdam": ("adam", dict(eta=0.1, beta_1=0.9, beta_2=0.99, tau=1e-3)),
          "FedYogi": ("yogi", dict(eta=0.01, beta_1=0.9, beta_2=0.99, tau=1e-3)),
          "FedAdagrad": ("adagrad", dict(eta=0.1, tau=1e-3))}


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max())


def versus_native(name: str, dtype: str, rounds: int = 5) -> float:
    hp, native, native_hp, extra = NATIVE[name]
    runs = [PairedRun(RunConfig(algo=a, hp=h, perturb="client", dtype=dtype, **{**SMALL, "rounds": rounds}, **kw))
            for a, h, kw in ((f"flwr:{name}", hp, {}), (native, native_hp, extra))]
    worst = 0.0
    for _ in range(rounds):
        for run in runs:
            run.step()
        worst = max(worst, _rel(runs[0].engine.x, runs[1].engine.x))
    return worst


def recorded(name: str, hp: dict, dtype: str, rounds: int):
    """A bridge run's global models (before round 1 and after each round) and the client models of each round."""
    seen, original = [], FlowerStrategy.combine

    def spy(self, ctx, uploads):
        seen.append(uploads["y"].double().clone())
        return original(self, ctx, uploads)

    FlowerStrategy.combine = spy
    try:
        run = PairedRun(RunConfig(algo=f"flwr:{name}", hp=hp, perturb="client", dtype=dtype,
                                  **{**SMALL, "rounds": rounds}))
        xs = [run.engine.x.double().clone()]
        for _ in range(rounds):
            run.step()
            xs.append(run.engine.x.double().clone())
    finally:
        FlowerStrategy.combine = original
    return xs, seen[1:]  # seen[0]: the start's trial round


def versus_hand(name: str, dtype: str) -> float:
    if name in FEDOPT:
        kind, hp = FEDOPT[name]
        xs, ys = recorded(name, hp, dtype, 3)
        want = _fedopt_by_hand(kind, xs, ys, hp["eta"], hp.get("beta_1", 0.0), hp.get("beta_2", 0.0), hp["tau"])
        return max(_rel(x, w) for x, w in zip(xs[1:], want))
    hp, rule = REFERENCES[name]
    xs, ys = recorded(name, hp, dtype, 1)
    y = ys[0].numpy()
    want = torch.stack([torch.stack([torch.as_tensor(rule(xs[0][i, j].numpy(), y[i, j])) for j in range(2)])
                        for i in range(2)])
    return _rel(xs[1], want)


def main():
    print("| strategy | checked against | max rel. difference float32 | float64 |")
    print("|---|---|---|---|")
    for name in [*NATIVE, *FEDOPT, *sorted(REFERENCES)]:
        against = (f"stabkit `{NATIVE[name][1]}` {NATIVE[name][2] or ''}" if name in NATIVE
                   else "Flower's form by hand, 3 rounds" if name in FEDOPT else "its rule by hand, round 1")
        measure = versus_native if name in NATIVE else versus_hand
        print(f"| {name} | {against} | {measure(name, 'float32'):.1e} | {measure(name, 'float64'):.1e} |",
              flush=True)


if __name__ == "__main__":
    main()
