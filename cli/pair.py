"""``stabkit pair``: run one algorithm on two neighbouring federations with coupled randomness.

The options are generated from ``RunConfig`` and ``TaskOptions`` (defaults come from the dataclasses);
algorithm hyperparameters are given as ``--hp NAME=VALUE`` for every algorithm alike. A config file
(``--config run.yaml|json``, keys as in ``config.json`` of a run) supplies values for options not given
on the command line.
"""
from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import click

from stabkit.config.presets import preset_reading, preset_values
from stabkit.config.runconfig import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import ConfigError
from stabkit.keyvalue import read_items
from stabkit.store.mapping import read_mapping
from stabkit_cli.help import Choice, Sectioned

ROUND_LISTS = tuple(f.name for f in dataclasses.fields(RunConfig) if f.type in (tuple, "tuple"))  # "0,50"


def _click_type(hint):
    """The click type of a config field: Optional[X] -> X; int-or-'full' and comma-separated lists -> str."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if len(args) == 1:
        return args[0]
    return str if args or hint is tuple else hint


def _fields():
    """``(config key, field, type hint)`` of every option: RunConfig's, then TaskOptions' (given flat)."""
    for cls in (RunConfig, TaskOptions):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if "help" in f.metadata:
                yield f.metadata["cli_name"] or f.name, f, hints[f.name]


def _options(f):
    """One click option per documented config field; defaults and help texts come from the dataclasses."""
    for key, field, hint in reversed(list(_fields())):
        name, text, default = key.replace("_", "-"), field.metadata["help"], field.default
        if hint is bool:  # an on/off flag, e.g. --constants/--no-constants
            decls, kw = [f"--{name}/--no-{name}"], {"help": f"{text}  [default: {'on' if default else 'off'}]"}
        else:
            kind = Choice(field.metadata["choices"]) if field.metadata.get("choices") else _click_type(hint)
            decls, kw = [f"--{name}"], {"type": kind, "show_default": default is not None, "help": text}
        if isinstance(default, tuple):
            default = ",".join(map(str, default))
        f = click.option(*decls, key, default=default, **kw)(f)
    return f


def _convert(key, value):
    if value is None:
        return None
    if key == "batch_size" and isinstance(value, str):
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
    """Merge preset (with its code reading of the chosen algorithm), config file and command line (explicit
    options win, then the file, then the preset) into a RunConfig."""
    file_values = read_mapping(config_path, "config", "run config") if config_path else {}
    values, hp = {}, {}
    if preset:
        algo = params["algo"] if "algo" in explicit else file_values.get("algo", params["algo"])
        reading = preset_reading(preset, algo)
        values, hp = {**preset_values(preset), **reading.run}, dict(reading.hp)
    values.update(file_values)
    for key in ("hp", "task_options"):
        if not isinstance(values.get(key) or {}, dict):
            raise ConfigError(f"invalid {key}={values[key]!r}: a mapping of names to values")
    for key, value in params.items():
        if key in explicit or key not in values and key not in (values.get("task_options") or {}):
            values[key] = _convert(key, value)
    hp.update(values.get("hp") or {})
    hp.update(read_items(hp_items, "hp", " ".join(hp_items)))  # --hp NAME=VALUE, each name once
    values["hp"] = hp
    for key in ROUND_LISTS:
        values[key] = _convert(key, values.get(key))
    values["batch_size"] = _convert("batch_size", values.get("batch_size"))
    return RunConfig.from_dict(values)


# The sections of `stabkit pair --help` (parameter names as the command receives them; `stabkit audit` shares
# them): an option in none is listed last under "Other options" (tests/cli/test_help.py wants none there).
SECTIONS = [
    ("Run: what is measured", ["algo", "hp_items", "task", "model", "hidden", "perturb", "client_mode", "pairs",
                               "rounds", "seed", "preset", "config_path", "resume_dir", "estimate", "flwr_app"]),
    ("Federation", ["clients", "heldout_clients", "participation", "clients_per_round", "partition",
                    "dirichlet_alpha", "shards_per_client", "val_fraction", "data_seed"]),
    ("Optimisation", ["local_steps", "batch_size", "lr", "global_lr", "lr_decay", "weight_decay",
                      "weight_decay_placement", "clip", "ri_beta", "ri_aggregation", "augment", "init", "dtype",
                      "device"]),
    ("Privacy", ["wrap", "dp_noise"]),
    ("Task data (synthetic, quadratic, npz, paper data sets)",
     ["synthetic_alpha", "synthetic_beta", "dim", "classes", "samples_per_client", "quad_dim", "quad_condition",
      "quad_heterogeneity", "quad_noise", "npz_path", "data_dir"]),
    ("Measurement", ["eval_every", "eval_fraction", "local_rounds", "sharpness_rounds", "constants"]),
    ("Output", ["out", "overwrite", "label", "checkpoint_every", "save_models", "store_updates", "tensorboard", "quiet",
                "verbose", "help"]),
]


@click.command(cls=Sectioned, sections=SECTIONS)
@_options
@click.option("--hp", "hp_items", multiple=True, metavar="NAME=VALUE",
              help="algorithm hyperparameter (repeatable), e.g. --hp beta=0.9 --hp mu=0.01")
@click.option("--config", "config_path", default=None, help="run config file (.yaml/.json); options override it")
@click.option("--preset", default=None,
              help="a paper's settings as defaults (see `stabkit presets`); --config and options override it")
@click.option("--out", default=None, help="output folder: the run directory (default runs/<algo>-<perturb>-<task>-<time>)")
@click.option("--overwrite", is_flag=True, help="replace the run already in --out (by default it is refused)")
@click.option("--resume", "resume_dir", default=None, metavar="RUN_DIR",
              help="continue the run in RUN_DIR from its checkpoint (with --rounds N: up to round N); "
                   "the metrics match an uninterrupted run byte for byte")
@click.option("--estimate", is_flag=True,
              help="build the run, time two rounds and one evaluation, print s/round, evaluation share, peak "
                   "memory and the projected wall time of the whole run, and exit without writing anything")
@click.option("--tensorboard", default=None, metavar="DIR",
              help="also write the per-round scalars (D_t mean and per pair, train/test loss and accuracy of both "
                   "trajectories, the gap, R_u - R_e) as TensorBoard events to DIR/<run directory name> when the "
                   "run ends (needs the tensorboard extra)")
@click.option("--quiet", is_flag=True, help="no progress display (the progress bar); the summary is still printed")
@click.option("--verbose", is_flag=True, help="also say which memory allocator policy the run uses")
@click.option("--flwr-app", default=None, metavar="PACKAGE.MODULE:FUNCTION",
              help="measure a whole Flower app: FUNCTION() returns its ClientApp, strategy, initial arrays and "
                   "partition counts (docs/flower.md); uses --seed, --pairs, --rounds, --clients-per-round and "
                   "--perturb none|client")
@click.option("--label", default=None, help="legend label of this run in `stabkit bounds` figures (recorded in "
                                            "config.json; default: the algorithm and what differs between runs)")
@click.pass_context
def pair(ctx, hp_items, config_path, preset, resume_dir, estimate, **params):
    """Run paired trajectories on neighbouring federations and log ||x_t - x'_t|| every round.

    \b
    Example (30 rounds of FedSAGD, 4 pairs, one client replaced in trajectory B):
      stabkit pair --algo fedsagd --perturb client --rounds 30 --pairs 4 --out runs/quick
    """
    out, overwrite, quiet, label, tensorboard, flwr_app, verbose = (
        params.pop(k) for k in ("out", "overwrite", "quiet", "label", "tensorboard", "flwr_app", "verbose"))
    explicit = {k for k in params if ctx.get_parameter_source(k) != click.core.ParameterSource.DEFAULT}
    if flwr_app is not None:  # a whole Flower app (stabkit_cli.flwr_app)
        from stabkit_cli.flwr_app import pair_flower_app, refuse_ignored
        refuse_ignored(explicit, hp_items, read_mapping(config_path, "config", "run config") if config_path else {},
                       preset, label)
        return pair_flower_app(flwr_app, build_config(params, explicit, config_path, hp_items, preset), out,
                               overwrite, resume_dir or estimate, quiet, tensorboard)
    if estimate:
        if resume_dir is not None:
            raise ConfigError(f"invalid option --estimate with --resume {resume_dir}: estimate a new run "
                              f"(its options, --preset or --config), not a resumed one")
        from stabkit.run.estimate import estimate_config
        estimate_config(build_config(params, explicit, config_path, hp_items, preset), echo=click.echo)
        return
    from stabkit.store.runstore import is_app_run

    if resume_dir is not None and is_app_run(resume_dir):  # a Flower app's run (stabkit_cli.flwr_app)
        from stabkit_cli.flwr_app import resume_flower_app
        return resume_flower_app(resume_dir, explicit, params, hp_items or config_path or preset or out or overwrite
                                 or label, quiet, tensorboard)
    # Everything the options alone decide is checked before torch is imported (a refusal takes well under 1 s)
    _tensorboard(tensorboard, None, resume_dir or out)
    if resume_dir is not None:
        cfg, out_dir, checkpoint = _checked_resume(resume_dir, explicit, params,
                                                   hp_items or config_path or preset or out or overwrite or label)
    else:
        cfg = build_config(params, explicit, config_path, hp_items, preset)
        out_dir, checkpoint = _checked_new_run(cfg, out, overwrite), None
    summary, out_dir = _built_and_run(cfg, out_dir, checkpoint, quiet, overwrite, label, verbose, tensorboard)
    _exit_status(ctx, summary, out_dir)


def _checked_resume(resume_dir, explicit: set, params: dict, other_options) -> tuple:
    """``(config, run directory, checkpoint)`` of the run in ``resume_dir`` to continue, its checkpoint read and
    checked before the run is built (an edited experiment is refused here)."""
    from stabkit.algorithms import compose

    cfg = _resumed_config(resume_dir, explicit, params, other_options)
    compose(cfg.algo_spec)
    from stabkit.run.resume_check import read_checkpoint  # torch: only once the options and the run's files pass

    return cfg, Path(resume_dir), read_checkpoint(Path(resume_dir), cfg)


def _checked_new_run(cfg, out, overwrite: bool):
    """The new run's directory (None: the default one), after everything the configuration alone decides is
    checked: hyperparameters, a Flower strategy's constructor, the output folder, a generated task's memory."""
    from stabkit.algorithms import compose
    from stabkit.algorithms.flower import check_strategy
    from stabkit.engine.memory import require_generated_memory
    from stabkit.store.runstore import require_out

    require_out(out)
    compose(cfg.algo_spec)  # the algorithm, its hyperparameters and wrappers
    check_strategy(cfg.algo_spec, cfg.sampled_clients)  # a Flower strategy's constructor, before torch
    out_dir = _checked_out_dir(out, overwrite, cfg.save_models)
    require_generated_memory(cfg.task, cfg.task_options)  # a generated task too large: as the run refuses it
    return out_dir


def _built_and_run(cfg, out_dir, checkpoint, quiet: bool, overwrite: bool, label, verbose: bool,
                   tensorboard=None) -> tuple:
    """Build the run of ``cfg``, run it into ``out_dir`` (None: the default one), or resume it from
    ``checkpoint`` (``read_checkpoint``'s, None for a new run), and print its summary (a DP run's epsilons
    too) with a time line of the whole process, and where its TensorBoard events went (``tensorboard``:
    ``--tensorboard DIR``; written also after a divergence or an interruption: what was logged);
    ``(summary, run directory)``."""
    from stabkit.privacy.runfile import summary_line
    from stabkit.run.experiment import PairedRun, default_out_dir  # imported on use: torch is slow to import
    from stabkit.run.uptime import process_seconds
    from stabkit.store.summary import format_summary

    run = PairedRun(cfg)
    out_dir = out_dir or default_out_dir(run.cfg)
    events = _tensorboard(tensorboard, out_dir)
    startup_s = process_seconds()  # the interpreter, imports, task, model and engine: all before round 1
    summary = _run_with_progress(run, out_dir, checkpoint, quiet, overwrite, label, verbose, events)
    click.echo(format_summary(summary, startup_s, process_seconds()))
    line = summary_line(out_dir)  # a DP run's epsilons
    if line:
        click.echo(line)
    for cb in events:
        click.echo(f"tensorboard: {cb.written}")
    return summary, out_dir


def _checked_out_dir(out, overwrite: bool, save_models):
    """``out`` as the new run's directory (None: the default one), refused if it cannot be written, holds a run
    (unless ``overwrite``) or has a ``models`` that is not a folder while models are to be saved."""
    from stabkit.store.outdir import check_writable
    from stabkit.store.runstore import check_new_run_dir
    from stabkit.store.saved_models import check_models_dir

    out_dir = Path(out) if out is not None else None
    if out_dir is not None:
        check_writable(out_dir)  # first: a name too long is refused before anything looks inside it
        check_new_run_dir(out_dir, overwrite)
        check_models_dir(out_dir, save_models)
    return out_dir


def _run_with_progress(run, out_dir: Path, checkpoint, quiet: bool, overwrite: bool, label, verbose: bool,
                       callbacks: list) -> dict:
    """Run ``run`` into ``out_dir`` (or resume it from ``checkpoint``) under a progress bar that names each
    phase after the rounds (``constants``), with the round loop's ``callbacks`` beside the run directory's;
    its summary."""
    resume = checkpoint is not None
    if resume:
        from stabkit.run.resume_check import checked_checkpoint

        checkpoint = checked_checkpoint(run, out_dir, checkpoint)  # refused before anything is printed or touched
    from stabkit.engine.alloc import policy

    click.echo(run.describe_evaluation())
    if verbose:
        click.echo(policy())  # which allocator the run uses (also recorded in config.json)
    from tqdm import tqdm

    cfg = run.cfg
    desc = f"{cfg.algo} {cfg.perturb}"
    with tqdm(total=cfg.rounds, unit="round", disable=quiet, dynamic_ncols=True, desc=desc) as bar:
        def progress(t, stats):
            if "stage" in stats:  # a phase after the rounds: the bar says what it is waiting for
                bar.set_description_str(f"{desc}: {stats['stage']}")
                return
            bar.update(t - bar.n)
            bar.set_postfix_str(f"eval {stats['eval_share']:.0%}", refresh=False)

        if resume:
            return run.resume(out_dir, progress=progress, checkpoint=checkpoint, callbacks=callbacks)
        return run.run(out_dir, progress=progress, overwrite=overwrite, label=label, callbacks=callbacks)


def _exit_status(ctx, summary: dict, out_dir: Path) -> None:
    """Exit 1 for a diverged run, 2 for a failed one (a plug-in's hook failed mid-run) and 130 for an
    interrupted one, saying what is kept."""
    if summary["status"] == "failed":  # one line; the rounds before are kept
        raise ConfigError(f"{summary['failed_reason']}; rounds 0-{summary['rounds_done']} are kept in {out_dir}")
    if summary["status"] == "diverged":
        click.echo(f"run diverged ({summary['diverged_reason']}) at round {summary['diverged_round']}; "
                   f"metrics up to round {summary['diverged_round'] - 1} are kept", err=True)
        ctx.exit(1)
    if summary["status"] == "interrupted":
        click.echo(f"interrupted at {summary['interrupted']}; metrics up to round {summary['rounds_done']} are "
                   f"kept in {out_dir}" + ("" if summary["constants"] == "estimated" else
                                           f" (constants {summary['constants']})"), err=True)
        ctx.exit(130)


def _tensorboard(logdir, run_dir, out=None) -> list:
    """``--tensorboard``: check the extra is installed and ``logdir`` (and ``logdir/<out's name>``) can be
    written (``run_dir`` None, before the run), or the round loop's callback writing the run's events to
    ``logdir/<run directory name>`` when it ends (a list: none without ``--tensorboard``)."""
    if logdir is None:
        return []
    from stabkit.store.tensorboard import TensorBoardEvents, check_logdir

    if run_dir is None:
        check_logdir(logdir, *([Path(out).name] if out else []))
        return []
    return [TensorBoardEvents(run_dir, Path(logdir) / Path(run_dir).name)]


RESUMABLE = {"rounds", "checkpoint_every", "save_models", "constants"}


def _resumed_config(resume_dir, explicit: set, params: dict, other_options):
    """The config of the run to continue: its own, with only --rounds and output options changeable."""
    changed = sorted(explicit - RESUMABLE)
    if changed or other_options:
        name = changed[0].replace("_", "-") if changed else "config/--preset/--hp/--out/--overwrite/--label"
        raise ConfigError(f"invalid option --{name} with --resume: a resumed run keeps its config; only "
                          f"--rounds, --checkpoint-every, --save-models and --constants may be given")
    from stabkit.config.runconfig import resume_config

    return resume_config(resume_dir, **{k: params[k] for k in explicit})


command = pair
