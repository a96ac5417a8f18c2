"""Named presets: each paper's experimental settings as defaults for a paired run.

A preset is a flat mapping of ``RunConfig`` / ``TaskOptions`` keys (the keys a config file takes) plus the
table it comes from. ``stabkit pair --preset NAME`` applies it under everything else: a config file
overrides a preset and options given on the command line override both. Local epochs are converted to
local steps K = epochs * (samples per client) / batch with the papers' client sizes, since stabkit counts
local steps. Presets set no algorithm: they describe the federation, data and optimiser, so one preset serves
every ``--algo``.

Each preset also carries the **code readings** of the paper's experiments (:class:`Reading`): where an
algorithm has several readings, stabkit's algorithm defaults follow the paper's text, while the
authors' code that produced the paper's tables often ran another (FedInit aggregating ``delta_from_init``,
FL-Simulator's FedAdam, the FedSWA code's FedMoSWA, FedLNAG's PyTorch Nesterov form, ...). Under a preset
the reading of the chosen ``--algo`` applies as defaults too (hyperparameters under ``hp``, run options such
as ``weight_decay_placement``); a config file and the command line override it, and ``stabkit presets NAME``
lists every reading with the source it follows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stabkit.errors import require


@dataclass(frozen=True)
class Reading:
    """How the paper's code ran one algorithm: hyperparameters, run options, and where that reading comes from
    (``spec``: the paper's appendix or the authors' code, and what it does)."""

    spec: str
    hp: dict = field(default_factory=dict)
    run: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Preset:
    source: str
    values: dict
    readings: dict = field(default_factory=dict)  # algo -> Reading


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

# The FedSAGD authors' code (the haozzh/FedANAG family of repositories) applies weight decay as
# torch.optim.SGD(weight_decay) on the final local direction, except inside FedLNAG's Nesterov buffer.
_FEDSAGD_READINGS = {
    "fedlnag": Reading("FedSAGD paper App. C.5 and the authors' code (fed_localnesterov): undamped PyTorch "
                       "Nesterov, buffer averaged across rounds (FedLNAG; momentum_sync=reset is FedLNAG*), "
                       "d = g + wd·y inside the buffer",
                       hp=dict(momentum_form="pytorch_nesterov", momentum_sync="average"),
                       run=dict(weight_decay_placement="gradient")),
    "fedanag": Reading("FedSAGD paper App. C.10 and the authors' code (+ wd·y on the final local direction, outside "
                       "1 + β)",
                       run=dict(weight_decay_placement="direction")),
    "mimelite": Reading("FedSAGD paper App. C.8 and the authors' code (G_i is the loss gradient at x_t, no decay term; "
                        "decay on "
                        "the final local direction)", run=dict(weight_decay_placement="direction")),
    "fedadam": Reading("FedSAGD paper App. C.6 (its experiments: η = 0.1, β1 = 0.9)", run=dict(global_lr=0.1)),
}
# The FedSWA authors' code (junkangLiu0/FedSWA, the old main.py).
_FEDSWA_READINGS = {
    "fedmoswa": Reading("the FedSWA authors' code (FedSWAS): γ hard-set 0.1, m = first round's mean upload, "
                        "Option II denominator K·η_l(1+ρ)/2",
                        hp=dict(gamma=0.1, init="first_upload", denominator="code")),
    "fedacg": Reading("the FedSWA authors' code: λ = 0.85", hp=dict(lam=0.85)),
    "mofedsam": Reading("the FedSWA authors' code: ρ_sam = 0.1, α_mo = 0.1", hp=dict(rho=0.1, alpha_mo=0.1)),
    "fedsam": Reading("the FedSWA authors' code: ρ_sam = 0.05", hp=dict(rho=0.05)),
}
# FL-Simulator, the FedInit authors' code: uploads measured from the RI start point.
_FROM_INIT = dict(ri_aggregation="delta_from_init")
_FEDINIT_READINGS = {
    "fedinit": Reading("FL-Simulator, the FedInit authors' code (aggregates w_K − w_0 with η_g)",
                       hp=dict(aggregation="delta_from_init")),
    "fedadam": Reading("FL-Simulator, the FedInit authors' code (v_0 = 0, τ = ε = 0.01, β2 = 0.99, η_g = 0.1; "
                       "with RI: uploads from the RI point)", hp=dict(v_init="zeros", tau=0.01, beta2=0.99),
                       run=dict(global_lr=0.1, **_FROM_INIT)),
    "feddyn": Reading("FL-Simulator, the FedInit authors' code (with RI the dual correction is anchored at the "
                      "RI point, server mean_active(w_K) + mean_all(h_i))", hp=dict(anchor="start")),
    "scaffold": Reading("FL-Simulator, the FedInit authors' code (with RI: uploads and c_i from the RI point)",
                        run=_FROM_INIT),
    "fedcm": Reading("FL-Simulator, the FedInit authors' code (with RI: ū = mean(w_K − w_0), α = 0.1)",
                     hp=dict(alpha=0.1), run=_FROM_INIT),
    "fedsam": Reading("FL-Simulator, the FedInit authors' code (with RI: uploads from the RI point; local SAM "
                      "ρ = 0.1)", hp=dict(rho=0.1),
                      run=_FROM_INIT),
}

PRESETS = {
    "fedsagd-cifar10": Preset("FedSAGD paper, experiments, Setting I (5 epochs x 250 / 50 = 25 steps)",
                              _cifar("cifar10", "fedavg_cnn", **_FEDSAGD_CIFAR), _FEDSAGD_READINGS),
    "fedsagd-cifar100": Preset("FedSAGD paper, experiments, Setting I (ResNet-18-GN main results)",
                               _cifar("cifar100", "resnet18_gn", **_FEDSAGD_CIFAR), _FEDSAGD_READINGS),
    "fedsagd-emnist": Preset("FedSAGD paper, experiments, Setting II (20 epochs x 96 / 48 = 40 steps; FedAvg lr 0.1)",
                             dict(task="emnist_l", model="logistic", partition="dirichlet", dirichlet_alpha=0.3,
                                  clients=500, participation=0.01, batch_size=48, local_steps=40, rounds=2000,
                                  lr=0.1, weight_decay=1e-3), _FEDSAGD_READINGS),
    "fedsagd-shakespeare": Preset("FedSAGD paper, experiments, Setting III (1 epoch x 2000 / 100 = 20 steps)",
                                  dict(task="shakespeare", model="char_lstm", clients=100, participation=0.03,
                                       batch_size=100, local_steps=20, rounds=1000, lr=1.0), _FEDSAGD_READINGS),
    "libra-cifar10": Preset("Libra paper, experiments (Fig. 2; K = 10 of the K sweep, 4-layer CNN = FedAvg CNN)",
                            _cifar("cifar10", "fedavg_cnn", **_LIBRA)),
    "libra-cifar100": Preset("Libra paper, App. E (Fig. 4: CIFAR-100, ResNet-18-GN, same settings)",
                             _cifar("cifar100", "resnet18_gn", **_LIBRA)),
    "fedswa-cifar10": Preset("FedSWA paper, experimental setup (Dir-0.6, 5 epochs x 500 / 50 = 50 steps; wd and clip "
                             "from the authors' code)",
                             _cifar("cifar10", "resnet18_gn", **_FEDSWA), _FEDSWA_READINGS),
    "fedswa-cifar100": Preset("FedSWA paper, experimental setup (Dir-0.6, ResNet-18-GN)",
                              _cifar("cifar100", "resnet18_gn", **_FEDSWA), _FEDSWA_READINGS),
    "fedswa-tinyimagenet": Preset("FedSWA paper, experimental setup (1000 samples per client: 5 x 1000 / 50 = "
                                  "100 steps)",
                                  _cifar("tinyimagenet", "resnet18_gn", **{**_FEDSWA, "local_steps": 100}),
                                  _FEDSWA_READINGS),
    "fedinit-cifar10": Preset("FedInit paper, experiments (10%-100, Dr 0.6, T 500; batch 50, 5 epochs, wd, clip from "
                              "the authors' code)",
                              _cifar("cifar10", "resnet18_gn", rounds=500, **_FEDINIT), _FEDINIT_READINGS),
    "fedinit-cifar100": Preset("FedInit paper, experiments (10%-100, Dr 0.6, T 800)",
                               _cifar("cifar100", "resnet18_gn", rounds=800, **_FEDINIT), _FEDINIT_READINGS),
}


def preset_values(name: str) -> dict:
    """The flat config values of preset ``name`` (one of :data:`PRESETS`), without algorithm readings."""
    require(name in PRESETS, "preset", name, f"one of {', '.join(PRESETS)}")
    return dict(PRESETS[name].values)


def preset_reading(name: str, algo: str) -> Reading:
    """The code reading of ``algo`` under preset ``name`` (empty when the paper's text is all there is)."""
    require(name in PRESETS, "preset", name, f"one of {', '.join(PRESETS)}")
    return PRESETS[name].readings.get(algo, Reading(""))
