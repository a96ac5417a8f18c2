"""Named presets: each paper's experimental settings as defaults for a paired run.

A preset is a flat mapping of ``RunConfig`` / ``TaskOptions`` keys (the keys a config file takes) plus the
table it comes from. ``stabkit pair --preset NAME`` applies it under everything else: a config file
overrides a preset and options given on the command line override both. Local epochs are converted to
local steps K = epochs * (samples per client) / batch with the papers' client sizes, since stabkit counts
local steps. Presets set no algorithm and no algorithm hyperparameters: they describe the federation,
data and optimiser, so one preset serves every ``--algo``.
"""
from __future__ import annotations

from dataclasses import dataclass

from stabkit.errors import require


@dataclass(frozen=True)
class Preset:
    source: str
    values: dict


def _cifar(task: str, model: str, **values) -> dict:
    return dict(task=task, model=model, partition="dirichlet", **values)


_FEDSAGD_CIFAR = dict(clients=200, participation=0.02, batch_size=50, local_steps=25, rounds=2000, lr=0.1,
                      lr_decay=0.998, weight_decay=1e-3, dirichlet_alpha=0.3)
_LIBRA = dict(clients=100, participation=0.1, batch_size=32, local_steps=10, rounds=500, lr=0.01,
              global_lr=1.0, weight_decay=1e-3, dirichlet_alpha=0.1)
_FEDSWA = dict(clients=100, participation=0.1, batch_size=50, local_steps=50, rounds=1000, lr=0.1,
               lr_decay=0.998, weight_decay=1e-3, clip=10.0, dirichlet_alpha=0.6)
_FEDINIT = dict(clients=100, participation=0.1, batch_size=50, local_steps=50, lr=0.1, lr_decay=0.998,
                weight_decay=1e-3, clip=10.0, dirichlet_alpha=0.6)

PRESETS = {
    "fedsagd-cifar10": Preset("fedsagd.md §5.1 Setting I, §5.2 (5 epochs x 250 / 50 = 25 steps)",
                              _cifar("cifar10", "fedavg_cnn", **_FEDSAGD_CIFAR)),
    "fedsagd-cifar100": Preset("fedsagd.md §5.1 Setting I (ResNet-18-GN main results), §5.2",
                               _cifar("cifar100", "resnet18_gn", **_FEDSAGD_CIFAR)),
    "fedsagd-emnist": Preset("fedsagd.md §5.1 Setting II, §5.2 (20 epochs x 96 / 48 = 40 steps; FedAvg lr 0.1)",
                             dict(task="emnist_l", model="logistic", partition="dirichlet", dirichlet_alpha=0.3,
                                  clients=500, participation=0.01, batch_size=48, local_steps=40, rounds=2000,
                                  lr=0.1, weight_decay=1e-3)),
    "fedsagd-shakespeare": Preset("fedsagd.md §5.1 Setting III, §5.2 (1 epoch x 2000 / 100 = 20 steps)",
                                  dict(task="shakespeare", model="char_lstm", clients=100, participation=0.03,
                                       batch_size=100, local_steps=20, rounds=1000, lr=1.0)),
    "libra-cifar10": Preset("libra.md §4.1 (Fig. 2; K = 10 of the K sweep, 4-layer CNN = FedAvg CNN)",
                            _cifar("cifar10", "fedavg_cnn", **_LIBRA)),
    "libra-cifar100": Preset("libra.md §4.2 (App. E Fig. 4: CIFAR-100, ResNet-18-GN, same settings)",
                             _cifar("cifar100", "resnet18_gn", **_LIBRA)),
    "fedswa-cifar10": Preset("fedswa.md §3.1-3.4 (Dir-0.6, 5 epochs x 500 / 50 = 50 steps, [CODE] wd, clip)",
                             _cifar("cifar10", "resnet18_gn", **_FEDSWA)),
    "fedswa-cifar100": Preset("fedswa.md §3.1-3.4 (Dir-0.6, ResNet-18-GN)",
                              _cifar("cifar100", "resnet18_gn", **_FEDSWA)),
    "fedswa-tinyimagenet": Preset("fedswa.md §3.1-3.4 (1000 samples per client: 5 x 1000 / 50 = 100 steps)",
                                  _cifar("tinyimagenet", "resnet18_gn", **{**_FEDSWA, "local_steps": 100})),
    "fedinit-cifar10": Preset("fedinit.md §4.1 (10%-100, Dr 0.6, T 500, [code] batch 50, 5 epochs, wd, clip)",
                              _cifar("cifar10", "resnet18_gn", rounds=500, **_FEDINIT)),
    "fedinit-cifar100": Preset("fedinit.md §4.1 (10%-100, Dr 0.6, T 800)",
                               _cifar("cifar100", "resnet18_gn", rounds=800, **_FEDINIT)),
}


def preset_values(name: str) -> dict:
    """The flat config values of preset ``name`` (one of :data:`PRESETS`)."""
    require(name in PRESETS, "preset", name, f"one of {', '.join(PRESETS)}")
    return dict(PRESETS[name].values)
