"""RunConfig: everything that defines one paired run, validated up front.

The CLI, config files and the Python API all build a :class:`RunConfig`; ``config.json`` in a run
directory is its ``to_dict()`` (plus the run's facts, ``RUN_FACTS``) so a run can be re-created exactly.
Each field's ``help`` metadata is its ``stabkit pair`` option text, and :meth:`RunConfig.client_lr` is the
client lr schedule. Validation happens here, before any output is written, and every bad value raises a
one-line :class:`~stabkit.errors.ConfigError`.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Optional, Union

from stabkit.algorithms.flower import is_flower
from stabkit.algorithms.relaxed_init import AGGREGATIONS as RI_AGGREGATIONS
from stabkit.algorithms.spec import AlgoSpec
from stabkit.algorithms.wrap import WRAP_HELP
from stabkit.config.fields import check_field_types, option
from stabkit.config.taskoptions import SEED_LIMIT, TaskOptions
from stabkit.errors import ConfigError, require
from stabkit.store.rundir import VERSION_KEY, RunDir
from stabkit.store.saved_models import SAVE_SPEC_HELP, parse_save_spec

CHECKPOINT_EVERY = 10  # default rounds between checkpoints (stabkit.store.checkpoint)
ROUND_LIMIT = 2 ** 63 - 1  # rounds key the random streams and fill int64 log columns
PERTURBATIONS = ("client", "sample", "remove-client", "remove-sample", "none")
REMOVALS = ("remove-client", "remove-sample")  # leave-one-out neighbours (stabkit.engine.perturbation)
CLIENT_MODES = ("active", "population")
DTYPES = ("float32", "float64")
DP_NOISE = ("coupled", "independent")  # stabkit.engine.noise
AUGMENTATIONS = ("none", "crop_flip")  # stabkit.engine.augment
WD_PLACEMENTS = ("direction", "gradient")  # stabkit.engine.paired: reference codes | FedSAGD paper's analysis

# Facts config.json records about a run beside its configuration; ignored when a config is read back.
# ``hp_resolved``: the algorithm's full hyperparameters (``hp`` with the defaults filled in), what the bounds read;
# ``algo_spec``: the algorithm as one spec (``RunConfig.algo_spec``, base, hp and wrappers in order);
# ``threads``: the intra-op threads of the run's large ops (stabkit.engine.threads); ``allocator``: the line saying
# which allocator the process used, ``heap_keep_mb`` (``cpu_cache_mb`` in runs before it was renamed): the freed memory it kept for reuse, 0 where none
# (stabkit.engine.alloc: timings differ, numbers do not); ``label``: its legend label; ``placement``: where a sweep
# job ran (stabkit.sweep.placement); ``format_version``: the run directory's layout (stabkit.store.rundir).
# Fields a run chooses itself when they are left open (None) and then records in config.json with the value used.
CHOSEN_BY_RUN = ("eval_every", "eval_fraction")
RUN_FACTS = ("versions", "device_used", "threads", "allocator", "heap_keep_mb", "cpu_cache_mb", "d", "n_min", "hp_resolved", "label",
             "placement", VERSION_KEY, "algo_spec")

CLIENT_MODE_HELP = (
    "active: every round one sampled slot of run B holds a held-out client, so the active sets are "
    "neighbours in every round, exactly as in the per-round stability proofs behind FedSAGD's Table 1 "
    "(the default, so measured curves are comparable with the bounds); population: the two populations "
    "differ in one client (FedSAGD Def. 3.4), which acts only in rounds where that client is sampled."
)


@dataclass(frozen=True)
class RunConfig:
    """One paired experiment: algorithm, task, federation, optimisation and perturbation settings."""

    algo: str = option("fedavg", "algorithm (see `stabkit algos`), or a plug-in's import path package.module:Class")
    hp: dict = field(default_factory=dict, metadata={  # algorithm hyperparameters as given (--hp NAME=VALUE)
        "doc": "the algorithm's hyperparameters as given, NAME -> value (`stabkit algos` lists them)",
        "option": "`--hp NAME=VALUE`"})
    task: str = option("digits", "digits (scikit-learn's bundled digits), synthetic (FedProx Synthetic(α,β)), "
                       "quadratic (least squares with known L, μ, σ_g), npz (your own file, --npz-path), or a "
                       "paper data set from --data-dir: cifar10, cifar100, mnist, fashion_mnist, emnist_l, "
                       "shakespeare, tinyimagenet; or a plug-in builder package.module:build "
                       "(TaskOptions -> stabkit.tasks.Task)")
    task_options: TaskOptions = field(default_factory=TaskOptions, metadata={
        "doc": "the task's options: clients, partition, data (TaskOptions)", "option": "its fields' options"})
    model: Optional[str] = option(None, "see `stabkit models` (default: the task's), or a plug-in factory "
                                  "package.module:factory (task -> torch.nn.Module)")
    hidden: int = option(64, "hidden width of the MLP")
    perturb: str = option("client", "what differs between the runs: client, sample (one training sample "
                          "replaced by a fresh draw from its client's distribution), remove-client (B trains "
                          "without one client: leave-one-out, the exact coupled retrain of unlearning), "
                          "remove-sample (B's copy of one client lacks one sample) or none (null pair)",
                          choices=PERTURBATIONS)
    client_mode: str = option("active", CLIENT_MODE_HELP, choices=CLIENT_MODES)
    pairs: int = option(8, "independent replicate pairs R (different perturbed clients/samples and seeds)")
    rounds: int = option(100, "communication rounds T")
    participation: float = option(0.25, "fraction of clients sampled per round, in (0, 1]")
    clients_per_round: Optional[int] = option(None, "clients sampled per round s (overrides --participation)")
    local_steps: int = option(10, "local steps K per round")
    batch_size: Union[int, str] = option(16, "minibatch size, or 'full' for full-batch gradients")
    lr: float = option(0.05, "client learning rate η_l")
    global_lr: float = option(1.0, "server learning rate η")
    lr_decay: float = option(1.0, "per-round multiplicative decay of η_l, in (0, 1]")
    weight_decay: float = option(0.0, "weight decay wd of every local step")
    weight_decay_placement: str = option(
        "direction", "direction: y - lr (direction + wd y), wd y added to the algorithm's final local direction "
        "as torch.optim.SGD(weight_decay) in the papers' codes; gradient: wd y added to the loss gradient before "
        "the algorithm mixes it (the FedSAGD paper's analysed reading)", choices=WD_PLACEMENTS)
    clip: Optional[float] = option(None, "clip each minibatch gradient to this norm (default: no clipping)")
    ri_beta: float = option(0.0, "relaxed initialisation (FedInit's RI) for any algorithm: clients start at "
                            "x_t + β(x_t − their last local model); 0 = off")
    ri_aggregation: str = option("model_avg", "with RI: model_avg (FedInit paper) or delta_from_init "
                                 "(reference code)", choices=RI_AGGREGATIONS)
    wrap: Optional[str] = option(None, WRAP_HELP)
    dp_noise: str = option("coupled", "a DP algorithm's noise: coupled (the same draw for both runs of a pair, so "
                           "D_T measures the algorithm) or independent (each run its own: the decoupled runs an "
                           "audit needs)", choices=DP_NOISE)
    dtype: str = option("float32", "float32 or float64", choices=DTYPES)
    device: str = option("auto", "auto, cpu or cuda[:N]")
    init: str = option("default", "default, zeros, or a .pt/.pth/.npy file (state dict or flat vector) both "
                       "runs start from")
    seed: int = option(0, "seed of all coupled random streams (init, sampling, minibatches, perturbation)")
    eval_every: Optional[int] = option(None, "evaluate losses/accuracies every this many rounds (discrepancy is "
                                       "logged every round; default: with --eval-fraction, chosen from the data "
                                       "size so evaluation takes at most ~25% of the run, all data every round "
                                       "where that is cheap; stabkit.run.evalbudget)")
    eval_fraction: Optional[float] = option(None, "compute the per-round metrics on this fixed fraction of every "
                                            "client's data and of the test set (the same samples for both runs "
                                            "and every round; all data at the last round); 1 = all")
    local_rounds: tuple = option((0,), "comma-separated rounds at which local discrepancy per local step is "
                                 "logged")
    sharpness_rounds: tuple = option((), "comma-separated rounds whose global models' sharpness (Hessian "
                                     "λ_max, λ_max/λ_5, trace, SAM and average-direction sharpness) is measured, "
                                     "to RUN/sharpness.csv")
    constants: bool = option(True, "estimate the bounds' constants (L, σ_l², σ_g², G, …) after the run "
                             "(constants.json)")
    augment: str = option("none", "none, or crop_flip (random 4-pixel-padded crop + horizontal flip, drawn from "
                          "the coupled streams so both runs augment alike; image tasks, minibatches only)",
                          choices=AUGMENTATIONS)
    checkpoint_every: int = option(CHECKPOINT_EVERY, "rounds between checkpoints of the whole run state (and one "
                                   "after the last round), for --resume; 0 = none")
    store_updates: bool = option(False, "store trajectory A's client updates of every round under RUN/updates/ "
                                 "(for `stabkit unlearn --method federaser`); costs pairs x clients per round x "
                                 "parameters x 4 bytes (float32) a round, e.g. 0.77 MB for 8 pairs x 5 clients x "
                                 "the digits MLP's 4,810")
    save_models: str = option("final", "global models of both runs of every pair saved as state dicts under "
                              "RUN/models/: " + SAVE_SPEC_HELP)

    def __post_init__(self):
        """The checks, in this order: types, the named choices, counts, rates, rounds and sizes, then the algorithm's spec."""
        check_field_types(self)
        self._check_choices()
        self._check_counts()
        self._check_rates()
        self._check_rounds_and_sizes()
        self._check_algo_spec()

    def _check_choices(self):
        require(self.perturb in PERTURBATIONS, "perturb", self.perturb, f"one of {', '.join(PERTURBATIONS)}")
        require(self.client_mode in CLIENT_MODES, "client_mode", self.client_mode,
                f"one of {', '.join(CLIENT_MODES)}")
        require(self.augment in AUGMENTATIONS, "augment", self.augment, f"one of {', '.join(AUGMENTATIONS)}")
        require(self.dtype in DTYPES, "dtype", self.dtype, f"one of {', '.join(DTYPES)}")
        require(self.dp_noise in DP_NOISE, "dp_noise", self.dp_noise, f"one of {', '.join(DP_NOISE)}")

    def _check_counts(self):
        for name in ("pairs", "rounds", "local_steps", "eval_every", "hidden"):
            value = getattr(self, name)
            if value is not None or name != "eval_every":
                require(isinstance(value, int) and value >= 1, name, value, "a positive integer")
        require(self.rounds <= ROUND_LIMIT, "rounds", self.rounds, f"at most {ROUND_LIMIT} (2**63 - 1): rounds "
                "are 64-bit counters of the random streams and the logs")
        require(isinstance(self.checkpoint_every, int) and self.checkpoint_every >= 0, "checkpoint_every",
                self.checkpoint_every, "a non-negative integer (0: no checkpoints)")
        parse_save_spec(self.save_models, self.rounds)  # validates the spec

    def _check_rates(self):
        for name in ("lr", "global_lr"):
            value = getattr(self, name)
            require(_is_real(value) and value > 0 and math.isfinite(value), name, value, "a positive number")
        require(_is_real(self.lr_decay) and 0 < self.lr_decay <= 1, "lr_decay", self.lr_decay,
                "a number in (0, 1] (per-round multiplicative decay of the client lr)")
        require(_is_real(self.weight_decay) and self.weight_decay >= 0, "weight_decay", self.weight_decay,
                "a non-negative number")
        require(self.weight_decay_placement in WD_PLACEMENTS, "weight_decay_placement",
                self.weight_decay_placement, f"one of {', '.join(WD_PLACEMENTS)}")
        require(_is_real(self.ri_beta) and math.isfinite(self.ri_beta), "ri_beta", self.ri_beta,
                "a real number (0 = no relaxed initialisation)")
        require(self.ri_aggregation in RI_AGGREGATIONS, "ri_aggregation", self.ri_aggregation,
                f"one of {', '.join(RI_AGGREGATIONS)}")
        require(self.clip is None or (_is_real(self.clip) and self.clip > 0), "clip", self.clip,
                "a positive gradient-norm threshold (or none)")
        require(self.eval_fraction is None or _is_real(self.eval_fraction) and 0 < self.eval_fraction <= 1,
                "eval_fraction",
                self.eval_fraction, "a fraction in (0, 1] of the data the per-round metrics are computed on")
        require(_is_real(self.participation) and 0 < self.participation <= 1, "participation",
                self.participation, "a fraction in (0, 1]")

    def _check_rounds_and_sizes(self):
        require(self.batch_size == "full" or (isinstance(self.batch_size, int) and self.batch_size >= 1),
                "batch_size", self.batch_size, "a positive integer or 'full'")
        s = self.sampled_clients
        require(isinstance(s, int) and s >= 1, "clients_per_round", s, "a positive integer")
        require(s <= self.task_options.clients, "clients_per_round", s,
                f"at most the number of clients ({self.task_options.clients})")
        if self.perturb == "remove-client":
            M = self.task_options.clients
            require(M >= 2, "perturb", self.perturb, "client, sample or none with one client: removing the only "
                    "client leaves no federation")
            require(s <= M - 1, "clients_per_round", s, f"at most {M - 1} with --perturb remove-client: run B's "
                    f"federation has M - 1 = {M - 1} clients and samples s of them every round (full "
                    f"participation of B: --clients-per-round {M - 1})")
        require(all(isinstance(r, int) and 0 <= r < self.rounds for r in self.local_rounds), "local_rounds",
                list(self.local_rounds), f"round indices in [0, {self.rounds})")
        require(all(isinstance(r, int) and 0 <= r <= self.rounds for r in self.sharpness_rounds),
                "sharpness_rounds", list(self.sharpness_rounds), f"round indices in [0, {self.rounds}]")
        require(0 <= self.seed < SEED_LIMIT, "seed", self.seed, "an integer in [0, 2**64)")
        require(all(isinstance(r, int) and not isinstance(r, bool) and 0 <= r < self.rounds
                    for r in self.local_rounds), "local_rounds", list(self.local_rounds),
                f"round indices in [0, {self.rounds})")
        require(self.device in ("auto", "cpu") or self.device.startswith("cuda"), "device", self.device,
                "auto, cpu or cuda[:N]")

    def _check_algo_spec(self):
        """The algorithm's spec parsed (its syntax and wrappers; the base is resolved when it is built)."""
        if self.wrap is not None and is_flower(self.algo):
            raise ConfigError(f"invalid wrap={self.wrap!r} with algo={self.algo!r}: stabkit's wrappers act on "
                              "stabkit's server step, which a Flower strategy replaces; use Flower's own wrapper "
                              "(e.g. --algo flwr:DifferentialPrivacyServerSideFixedClipping --hp strategy=...)")
        self.algo_spec  # parsed now: a bad variant, --hp or --wrap is refused with the configuration

    @functools.cached_property
    def algo_spec(self) -> AlgoSpec:
        """The run's algorithm as one spec: ``algo`` (a variant's fixed values included), ``hp``, relaxed
        initialisation and ``wrap`` read once (:class:`~stabkit.algorithms.spec.AlgoSpec`); what
        :func:`~stabkit.algorithms.compose` builds and config.json records as ``algo_spec``."""
        return AlgoSpec.parse(self.algo, self.hp, self.wrap, self.ri_beta, self.ri_aggregation)

    @property
    def sampled_clients(self) -> int:
        """s = |S_t|: clients_per_round if given, else round(participation * M), at least 1."""
        if self.clients_per_round is not None:
            return self.clients_per_round
        return max(1, int(round(self.participation * self.task_options.clients)))

    def client_lr(self, t):
        """eta_l(t) = lr * lr_decay^t: the client learning rate of round t (0-based; also elementwise for an
        array of rounds). The only place the schedule is computed: engine, metrics and bounds use it."""
        return self.lr * self.lr_decay ** t

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["local_rounds"] = list(self.local_rounds)
        d["sharpness_rounds"] = list(self.sharpness_rounds)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        """Build from a (possibly partial) mapping, e.g. a config file or a run's config.json (whose
        recorded facts, ``RUN_FACTS``, are ignored); unknown keys are errors."""
        d = {k: v for k, v in d.items() if k not in RUN_FACTS}
        known = {f.name for f in dataclasses.fields(cls)}
        # Task options may also be given flat; the data seed is ``data_seed`` (``seed`` is the run's).
        task_known = {f.name for f in dataclasses.fields(TaskOptions)} - {"seed"} | {"data_seed"}
        opts = d.pop("task_options", None) or {}
        require(isinstance(opts, dict), "task_options", opts, "a mapping of task option names to values")
        opts = dict(opts)
        for key in list(d):
            if key in task_known:
                opts["seed" if key == "data_seed" else key] = d.pop(key)
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"invalid config key {unknown[0]!r}: allowed keys are "
                              f"{', '.join(sorted(known | task_known))}")
        for key in ("local_rounds", "sharpness_rounds"):
            if isinstance(d.get(key), int) and not isinstance(d[key], bool):
                d[key] = (d[key],)  # one round, as --local-rounds 5 gives
            if isinstance(d.get(key), list):
                d[key] = tuple(d[key])
        try:
            return cls(task_options=TaskOptions(**opts), **d)
        except TypeError as e:  # wrong value types that dataclass construction itself rejects
            raise ConfigError(f"invalid config: {e}") from None

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)


def resume_config(out, rounds: Optional[int] = None, **changes) -> RunConfig:
    """The config of the run in ``out`` (its ``config.json``), with ``rounds`` and output ``changes``
    (``checkpoint_every``, ``save_models``) applied. Reads no tensor: ``stabkit pair --resume`` refuses a
    bad directory or option before torch is imported."""
    cfg = RunConfig.from_dict(RunDir(out, "resume").config)
    return cfg.replace(**({"rounds": rounds} if rounds is not None else {}), **changes)


def _is_real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
