"""Where two identical GPU runs first differ: gradients, evaluation, rounds (a diagnosis for a lent device).

    python3 benchmarks/gpu_determinism.py

In deterministic mode (as runs are), two runs of tests/engine/test_cuda.py's config two rounds on: are their global
models identical; then each run's evaluator repeatedly on the same models: which metrics take more than one
value within one evaluator and across the two; and the evaluation's pieces (segment means, the gradient)
repeated alone.
"""
from __future__ import annotations

from stabkit.engine import machine

machine.apply()  # a benchmark is an entry point: the machine policy before torch, as the stabkit command applies it

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stabkit import RunConfig, TaskOptions  # noqa: E402
from stabkit.run.experiment import PairedRun  # noqa: E402
from stabkit.run.preflight import resolve_device  # noqa: E402

CFG = dict(task="digits", model="cnn", pairs=2, rounds=4, clients_per_round=3, local_steps=3, batch_size=8,
           task_options=TaskOptions(clients=6), dtype="float32", constants=False, local_rounds=(),
           device=("cuda" if torch.cuda.is_available() else "cpu"), algo="fedavg")


def evaluations(calls: int = 12):
    """Two runs two rounds on; then each run's evaluator ``calls`` times on run a's models: which metrics take
    more than one value, within an evaluator and across the two."""
    from stabkit.engine import evaluation
    runs = [PairedRun(RunConfig(**CFG)) for _ in range(2)]
    recs = [[r.engine.step(t) for t in range(2)][-1] for r in runs]
    print("  global models after 2 rounds identical:", torch.equal(runs[0].engine.x, runs[1].engine.x))
    x, rows = runs[0].engine.x, recs[0].rows
    values = {}
    for i, r in enumerate(runs):
        for _ in range(calls):
            for k, v in r.evaluator._evaluate(x, rows).items():
                values.setdefault(k, []).append((i, v.tobytes()))
    for k, vs in values.items():
        within = [len({b for j, b in vs if j == i}) for i in (0, 1)]
        across = len({b for _, b in vs})
        if across > 1:
            print(f"  {k}: distinct values within evaluator a {within[0]}, b {within[1]}, across both {across}")
    ev = runs[0].evaluator
    theta = x.reshape(-1, x.shape[-1])
    with torch.no_grad(), torch.enable_grad():
        _, losses, _ = ev.model.evaluate(theta, *ev.train[:2], ev.train_w)
    seg = {evaluation._segment_mean(losses, ev.train[2], ev.data.num_rows).cpu().numpy().tobytes()
           for _ in range(50)}
    print(f"  _segment_mean (index_add_) over 50 calls: {len(seg)} distinct results")
    grads = {ev.model.evaluate(theta, *ev.train[:2], ev.train_w)[0].pow(2).sum(1).cpu().numpy().tobytes()
             for _ in range(30)}
    print(f"  evaluate gradient norms over 30 calls: {len(grads)} distinct results")


def main():
    resolve_device(CFG["device"])
    torch.use_deterministic_algorithms(True)
    print("deterministic:", torch.are_deterministic_algorithms_enabled(), "cudnn.deterministic:",
          torch.backends.cudnn.deterministic, "fill_uninitialized_memory:",
          torch.utils.deterministic.fill_uninitialized_memory, "CUBLAS_WORKSPACE_CONFIG:",
          os.environ.get("CUBLAS_WORKSPACE_CONFIG"))
    print("evaluations:")
    evaluations()


if __name__ == "__main__":
    main()
