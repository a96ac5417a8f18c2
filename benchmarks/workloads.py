"""The benchmark workloads W1-W5 of issue 5: a RunConfig per pair count plus the Task they run on.

W1 is FedProx's Synthetic(1,1) federation (100 clients x 100 samples, 60 features, 10 classes) with
logistic regression; W2 the same federation shape on random 1x28x28 images with LeNet-5; W3 the default
digits run; W4 the FedAvg CNN (FedSAGD Table 5) and W5 ResNet-18-GN at CIFAR shapes on fixture-sized
random images (throughput does not depend on pixel values, so no data set has to be downloaded).
``scale`` < 1 shrinks every workload (fewer clients, smaller batches) for the smoke test.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from stabkit import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.tasks import build_task
from stabkit.tasks.base import Task


@dataclass
class Workload:
    name: str
    description: str
    config: Callable  # pairs -> RunConfig
    task: Callable  # () -> Task
    pairs: tuple = (1, 8)  # pair counts measured
    rounds: int = 5  # timed rounds per repetition
    baseline: bool = True  # also time the per-client loop
    evaluate: bool = True  # time the per-round evaluation too (off where it would dominate the benchmark)
    scaling: tuple = ()  # clients per round / K values to fit the round-time exponents on (empty: none)
    scaling_pairs: int = 8  # pair count the exponents are measured at


def image_task(clients: int, samples: int, shape: tuple, classes: int = 10, heldout: int = 6,
               seed: int = 0) -> Task:
    """Random images ``[n, *shape]`` with random labels in federated form (a shape fixture, not data)."""
    rng = np.random.default_rng(seed)
    n_val = max(1, samples // 5)

    def draw(n):
        return rng.standard_normal((n, *shape)).astype(np.float32), rng.integers(0, classes, n)

    train = [draw(samples) for _ in range(clients + heldout)]
    val = [draw(n_val) for _ in range(clients + heldout)]
    test_x, test_y = draw(max(classes, samples))
    return Task(name="images", kind="classification", num_classes=classes, input_shape=tuple(shape),
                train_x=[x for x, _ in train], train_y=[y for _, y in train],
                val_x=[x for x, _ in val], val_y=[y for _, y in val], test_x=test_x, test_y=test_y,
                num_train_clients=clients, default_model="lenet5", description=f"random {shape} images")


def _federation(clients: int, samples: int) -> TaskOptions:
    return TaskOptions(clients=clients, heldout_clients=6, samples_per_client=samples)


def workloads(scale: float = 1.0, device: str = "cpu") -> dict:
    """Name -> :class:`Workload`; ``scale`` shrinks clients/samples/batches (smoke test)."""
    c = lambda n: max(2, int(round(n * scale)))  # noqa: E731 (a size scaler)
    M, n, s = c(100), c(100), c(10)
    fed = dict(algo="fedavg", device=device, constants=False, local_rounds=(), rounds=1000)
    w1 = dict(task_options=_federation(M, n), clients_per_round=s, local_steps=c(10), batch_size=c(10),
              lr=0.05, **fed)
    out = [
        Workload("W1", f"Synthetic(1,1) logistic, {M} clients x {n}, s={s}, K={c(10)}, B={c(10)}",
                 lambda R: RunConfig(task="synthetic", pairs=R, **w1),
                 lambda: build_task("synthetic", _federation(M, n)), rounds=20,
                 scaling=(5, 10, 20, 40) if scale >= 1 else (1, 2, 3, 4)),
        Workload("W2", f"LeNet-5, same federation on 1x28x28 images, s={s}, K={c(10)}, B={c(10)}",
                 lambda R: RunConfig(task="synthetic", model="lenet5", pairs=R, **w1),
                 lambda: image_task(M, n, (1, 28, 28)), rounds=2, evaluate=False,
                 scaling=(5, 10, 20, 40) if scale >= 1 else (1, 2, 3, 4), scaling_pairs=1),
        Workload("W3", "digits (default run: MLP, 20 clients, s=5, K=10, B=16)",
                 lambda R: RunConfig(pairs=R, device=device, constants=False, local_rounds=(),
                                     task_options=TaskOptions(clients=c(20))),
                 lambda: build_task("digits", TaskOptions(clients=c(20))), rounds=10),
        # W4 times 3 consecutive rounds per repetition (1 until this stop): a run's rounds follow one another, and a
        # single round right after the per-client loop's measured 44.2% / 42.2% against 50.5% / 43.9% for three
        # (one thread / two, consecutive benchmark processes; a second run of three: 52.9% / 55.0%)
        Workload("W4", f"FedAvg CNN (FedSAGD Table 5), 3x32x32, {c(20)} clients x {c(100)}, s={c(4)}, "
                       f"K={c(2)}, B={c(50)}",
                 lambda R: RunConfig(task="synthetic", model="fedavg_cnn", pairs=R, clients_per_round=c(4),
                                     local_steps=c(2), batch_size=c(50), lr=0.05,
                                     task_options=_federation(c(20), c(100)),
                                     **{k: v for k, v in fed.items()}),
                 lambda: image_task(c(20), c(100), (3, 32, 32)), pairs=(1,), rounds=3, evaluate=False),
        Workload("W5", f"ResNet-18-GN, 3x32x32, 2 pairs x {c(4)} clients, K=1, B={c(16)}",
                 lambda R: RunConfig(task="synthetic", model="resnet18_gn", pairs=R, clients_per_round=c(4),
                                     local_steps=1, batch_size=c(16), lr=0.05,
                                     task_options=_federation(c(8), c(32)), **fed),
                 lambda: image_task(c(8), c(32), (3, 32, 32)), pairs=(2,), rounds=1, baseline=False,
                 evaluate=False),
    ]
    return {w.name: w for w in out}
