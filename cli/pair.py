"""``stabkit pair``: run one algorithm on two neighbouring federations with coupled randomness.

The options are generated from ``RunConfig`` and ``TaskOptions`` (defaults come from the dataclasses);
algorithm hyperparameters are given as ``--hp NAME=VALUE`` for every algorithm alike. A config file
(``--config run.yaml|json``, keys as in ``config.json`` of a run) supplies values for options not given
on the command line.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from stabkit.run.config import CLIENT_MODE_HELP, RunConfig, read_mapping
from stabkit.errors import ConfigError
from stabkit.run.experiment import PairedRun, default_out_dir
from stabkit.run.presets import preset_values
from stabkit.run.summary import format_summary
from stabkit.tasks.options import TaskOptions

_RUN_DEFAULTS = RunConfig()
ROUND_LISTS = ("local_rounds", "sharpness_rounds")  # options given as comma-separated round indices
_TASK_DEFAULTS = TaskOptions()

# (config key, click type, help). Defaults are read from the dataclasses.
OPTIONS = [
    ("algo", str, "algorithm (see `stabkit algos`)"),
    ("perturb", str, "what differs between the runs: client, sample (one training sample replaced by a fresh "
                     "draw from its client's distribution) or none (null pair)"),
    ("client_mode", str, CLIENT_MODE_HELP),
    ("task", str, "digits (scikit-learn's bundled digits), synthetic (FedProx Synthetic(α,β)), quadratic "
                  "(least squares with known L, μ, σ_g), npz (your own file, --npz-path), or a paper data set "
                  "from --data-dir: cifar10, cifar100, mnist, fashion_mnist, emnist_l, shakespeare, tinyimagenet"),
    ("model", str, "see `stabkit models` (default: the task's)"),
    ("hidden", int, "hidden width of the MLP"),
    ("pairs", int, "independent replicate pairs R (different perturbed clients/samples and seeds)"),
    ("rounds", int, "communication rounds T"),
    ("participation", float, "fraction of clients sampled per round, in (0, 1]"),
    ("clients_per_round", int, "clients sampled per round s (overrides --participation)"),
    ("local_steps", int, "local steps K per round"),
    ("batch_size", str, "minibatch size, or 'full' for full-batch gradients"),
    ("lr", float, "client learning rate η_l"),
    ("global_lr", float, "server learning rate η"),
    ("lr_decay", float, "per-round multiplicative decay of η_l, in (0, 1]"),
    ("weight_decay", float, "weight decay added to every local gradient"),
    ("clip", float, "clip each minibatch gradient to this norm (default: no clipping)"),
    ("ri_beta", float, "relaxed initialisation (FedInit's RI) for any algorithm: clients start at "
                       "x_t + β(x_t − their last local model); 0 = off"),
    ("ri_aggregation", str, "with RI: model_avg (FedInit paper) or delta_from_init (reference code)"),
    ("augment", str, "none, or crop_flip (random 4-pixel-padded crop + horizontal flip, drawn from the coupled "
                      "streams so both runs augment alike; image tasks, minibatches only)"),
    ("dtype", str, "float32 or float64"),
    ("device", str, "auto, cpu or cuda[:N]"),
    ("init", str, "default, zeros, or a .pt/.pth/.npy file (state dict or flat vector) both runs start from"),
    ("seed", int, "seed of all coupled random streams (init, sampling, minibatches, perturbation)"),
    ("eval_every", int, "evaluate losses/accuracies every this many rounds (discrepancy is logged every round)"),
    ("eval_fraction", float, "compute the per-round metrics on this fixed fraction of every client's data and "
                             "of the test set (the same samples for both runs and every round); 1 = all"),
    ("local_rounds", str, "comma-separated rounds at which local discrepancy per local step is logged"),
    ("sharpness_rounds", str, "comma-separated rounds whose global models' sharpness (Hessian λ_max, λ_max/λ_5, "
                              "trace, SAM and average-direction sharpness) is measured, to RUN/sharpness.csv"),
]
TASK_OPTIONS = [
    ("clients", int, "training clients M"),
    ("heldout_clients", int, "held-out clients (half replace clients, half estimate the unseen-client risk)"),
    ("partition", str, "iid, dirichlet or shards (digits, npz-free tasks with pooled data)"),
    ("dirichlet_alpha", float, "Dirichlet label-skew concentration α > 0"),
    ("shards_per_client", int, "shards per client for --partition shards"),
    ("val_fraction", float, "fraction of each client's samples held out for its validation split"),
    ("data_seed", int, "seed of the data generation and partition"),
    ("synthetic_alpha", float, "Synthetic(α, β): variance of the model heterogeneity"),
    ("synthetic_beta", float, "Synthetic(α, β): variance of the feature heterogeneity"),
    ("dim", int, "synthetic feature dimension"),
    ("classes", int, "synthetic number of classes"),
    ("samples_per_client", int, "synthetic/quadratic training samples per client"),
    ("quad_dim", int, "quadratic dimension"),
    ("quad_condition", float, "quadratic condition number L/μ"),
    ("quad_heterogeneity", float, "quadratic spread of client optima"),
    ("quad_noise", float, "quadratic target noise"),
    ("npz_path", str, "npz file with arrays x, y, client (optional x_test, y_test)"),
    ("data_dir", str, "directory with a paper data set's published files (cifar10, cifar100, mnist, "
                      "fashion_mnist, emnist_l, shakespeare, tinyimagenet; README 'Data sets')"),
]


def _default(key):
    if key == "data_seed":
        return _TASK_DEFAULTS.seed
    if any(f.name == key for f in dataclasses.fields(TaskOptions)):
        return getattr(_TASK_DEFAULTS, key)
    value = getattr(_RUN_DEFAULTS, key)
    return ",".join(map(str, value)) if key in ROUND_LISTS else value


def _options(f):
    for key, typ, text in reversed(OPTIONS + TASK_OPTIONS):
        default = _default(key)
        f = click.option(f"--{key.replace('_', '-')}", key, type=typ, default=default,
                         show_default=default is not None, help=text)(f)
    return f


def _parse_value(text: str):
    """A --hp value: none/null, int, float, or a plain string."""
    if text.lower() in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _convert(key, value):
    if value is None:
        return None
    if key == "batch_size":
        if value == "full":
            return value
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"invalid batch_size={value!r}: a positive integer or 'full'") from None
    if key in ROUND_LISTS and isinstance(value, str):
        try:
            return tuple(int(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise ConfigError(f"invalid {key}={value!r}: comma-separated round indices") from None
    return value


def build_config(params: dict, explicit: set, config_path, hp_items, preset=None) -> RunConfig:
    """Merge preset, config file and command line (explicit options win, then the file) into a RunConfig."""
    values = {**(preset_values(preset) if preset else {}), **(read_mapping(config_path, "config", "run config") if config_path else {})}
    for key, value in params.items():
        if key in explicit or key not in values and key not in (values.get("task_options") or {}):
            values[key] = _convert(key, value)
    hp = dict(values.get("hp") or {})
    for item in hp_items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"invalid hp={item!r}: expected NAME=VALUE, e.g. --hp beta=0.9")
        hp[name.strip()] = _parse_value(text.strip())
    values["hp"] = hp
    for key in ROUND_LISTS:
        values[key] = _convert(key, values.get(key))
    values["batch_size"] = _convert("batch_size", values.get("batch_size"))
    return RunConfig.from_dict(values)


@click.command()
@_options
@click.option("--hp", "hp_items", multiple=True, metavar="NAME=VALUE",
              help="algorithm hyperparameter (repeatable), e.g. --hp beta=0.9 --hp mu=0.01")
@click.option("--config", "config_path", default=None, help="run config file (.yaml/.json); options override it")
@click.option("--preset", default=None,
              help="a paper's settings as defaults (see `stabkit presets`); --config and options override it")
@click.option("--out", default=None, help="run directory (default runs/<algo>-<perturb>-<task>-<time>)")
@click.option("--quiet", is_flag=True, help="no progress bar")
@click.option("--constants/--no-constants", "constants", default=None,
              help="estimate the bounds' constants (L, σ_l², σ_g², G, …) after the run [default: on]")
@click.pass_context
def pair(ctx, hp_items, config_path, preset, out, quiet, constants, **params):
    """Run paired trajectories on neighbouring federations and log ||x_t - x'_t|| every round."""
    if constants is not None:
        params["constants"] = constants
    explicit = {k for k in params if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT}
    cfg = build_config(params, explicit, config_path, hp_items, preset)
    run = PairedRun(cfg)
    out_dir = Path(out) if out else default_out_dir(cfg)
    from tqdm import tqdm

    with tqdm(total=cfg.rounds, unit="round", disable=quiet, dynamic_ncols=True,
              desc=f"{cfg.algo} {cfg.perturb}") as bar:
        summary = run.run(out_dir, progress=lambda t: bar.update(1))
    click.echo(format_summary(summary))
    if summary["status"] == "diverged":
        click.echo(f"run diverged (non-finite parameters or losses) at round {summary['diverged_round']}; "
                   f"metrics up to round {summary['diverged_round'] - 1} are kept", err=True)
        ctx.exit(1)


command = pair
