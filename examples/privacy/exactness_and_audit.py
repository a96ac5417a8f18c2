"""The figures of docs/privacy.md that are not a single command: the accountant's epsilon of one round of
DP-FedAvg with full participation against the analytic Gaussian mechanism, and the audit's epsilon_lower against
the number of trials on a Gaussian mechanism of known epsilon.

    .venv/bin/python examples/privacy/exactness_and_audit.py [--seeds 20]

Part 1 runs one round of DP-FedAvg on the quadratic (6 clients, all in the round) for several noise multipliers z
and compares the run's privacy.json with Balle & Wang's analytic epsilon of the Gaussian mechanism with
std / sensitivity = z / 2 (dp-accounting's ``get_epsilon_gaussian``). Part 2 simulates the Gaussian mechanism with
epsilon = 2 at delta = 1e-5 directly (one score per output) and audits it with N trials, over several seeds.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from stabkit import RunConfig  # noqa: E402
from stabkit.config.taskoptions import TaskOptions  # noqa: E402
from stabkit.extras import require_extra  # noqa: E402
from stabkit.privacy.audit import epsilon_lower  # noqa: E402
from stabkit.run.experiment import run_pair  # noqa: E402

DELTA = 1e-5


def exactness(zs=(0.5, 1.0, 2.0, 4.0, 8.0)):
    dpa = require_extra("privacy")
    print("z      accountant (PLD)   RDP        analytic (Balle & Wang)   relative difference")
    with tempfile.TemporaryDirectory() as tmp:
        for z in zs:
            cfg = RunConfig(algo="dp_fedavg", hp={"clip": 0.3, "noise_multiplier": z}, task="quadratic", rounds=1,
                            pairs=2, clients_per_round=6, perturb="client", client_mode="population",
                            constants=False, local_steps=2, batch_size=4,
                            task_options=TaskOptions(clients=6, heldout_clients=2, quad_dim=4, samples_per_client=8))
            run_pair(cfg, Path(tmp) / f"z{z}")
            record = json.loads((Path(tmp) / f"z{z}" / "privacy.json").read_text())
            exact = dpa.get_epsilon_gaussian(z / 2, DELTA)
            got = record["accountant"]
            print(f"{z:<6g} {got['pld']:<18.6g} {got['rdp']:<10.6g} {exact:<25.6g} "
                  f"{abs(got['pld'] - exact) / exact:.2e}")


def audit_curve(seeds: int, trials=(1_000, 3_000, 10_000, 30_000, 100_000)):
    dpa = require_extra("privacy")
    sigma = dpa.get_sigma_gaussian(2.0, DELTA)
    print(f"\nGaussian mechanism, epsilon = 2 at delta = {DELTA:g} (std {sigma:.4f}, sensitivity 1), {seeds} seeds")
    print("trials    epsilon_lower: median   min     max")
    for n in trials:
        values = []
        for seed in range(seeds):
            g = np.random.default_rng(seed)
            values.append(epsilon_lower(g.normal(0, sigma, n), g.normal(1, sigma, n), DELTA)["epsilon_lower"])
        print(f"{n:<9d} {np.median(values):<22.3f} {min(values):<7.3f} {max(values):.3f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args(argv)
    exactness()
    audit_curve(args.seeds)


if __name__ == "__main__":
    main()
