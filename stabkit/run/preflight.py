"""Every check made before a paired run allocates its state or writes a file: the task's data, the
algorithm and its hyperparameters, the model factory against the task, the batch size, the device and the
memory the run needs.

``preflight`` is what :class:`~stabkit.run.experiment.PairedRun` calls first; sweeps and the atlas check
their jobs with ``build_checked_task`` + ``check_run`` from here, without importing the round loop's
module. Each check raises a one-line :class:`~stabkit.errors.ConfigError` naming the bad value.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Optional

import torch
from torch import nn

from stabkit import plugins
from stabkit.algorithms import compose
from stabkit.config.runconfig import RunConfig
from stabkit.engine.alloc import limit_bytes
from stabkit.engine.contract import CheckedAlgorithm
from stabkit.engine.machine import require_cuda_policy
from stabkit.engine.memory import require_generated_memory, require_memory, run_bytes
from stabkit.errors import ConfigError, require
from stabkit.models.contract import check_module
from stabkit.models.registry import build_model
from stabkit.tasks import build_task
from stabkit.tasks.base import Task, check_task

CHECK_ON_CPU_PARAMS = 1 << 21
"""Models up to this many parameters are built on the CPU for :func:`check_run`'s forward check (a few ms;
the global random state is left as it was), larger ones on the ``meta`` device (nothing allocated)."""


@dataclasses.dataclass
class Checked:
    """What :func:`preflight` returns: the run's configuration as recorded (client counts from the task,
    the model's name), its task, a factory of fresh modules, the algorithm and the device."""
    cfg: RunConfig
    task: Task
    make_module: Callable
    algo: object
    device: torch.device


def preflight(cfg: RunConfig, task: Optional[Task] = None, model=None) -> Checked:
    """Check the run ``cfg`` (on a ready-made ``task`` and ``model`` factory or module, if given) before
    anything is allocated; the task is built here, refused first if its generated arrays would not fit."""
    if task is not None:
        check_task(task, getattr(task, "name", type(task).__name__))
        cfg = cfg.replace(task=task.name)
    task = task if task is not None else build_checked_task(cfg)
    cfg = cfg.replace(task_options=dataclasses.replace(
        cfg.task_options, clients=task.num_train_clients, heldout_clients=task.num_heldout_clients))
    make_module, label = module_maker(cfg, task, model)
    cfg = cfg if model is None else cfg.replace(model=label)
    algo, device = check_run(cfg, task, make_module)
    return Checked(cfg, task, make_module, algo, device)


def resolve_device(name: str) -> torch.device:
    """The torch device for ``--device`` (``auto``: CUDA where available); a pure check, setting nothing (the
    CUDA settings a run's numbers need are the run's, :mod:`stabkit.engine.determinism`)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"invalid device={name!r}: CUDA is not available here; use cpu or auto")
    return torch.device(name)


def build_checked_task(cfg: RunConfig) -> Task:
    """``cfg``'s task, refused before it is generated if its arrays would not fit in memory."""
    require_generated_memory(cfg.task, cfg.task_options)
    return build_task(cfg.task, cfg.task_options)


def check_run(cfg: RunConfig, task: Task, make_module: Optional[Callable] = None):
    """Everything about ``cfg`` on ``task`` that can be checked before a tensor is allocated: the algorithm and
    its hyperparameters, model/task compatibility, batch size against the clients' data, the device, the
    allocator's limit and the memory the run needs. ``make_module``: the run's module factory (default: ``cfg.model`` built for
    ``task``). Returns ``(algorithm, device)``."""
    algo = checked_algorithm(cfg)
    d = _check_model(cfg, task, make_module or module_maker(cfg, task, None)[0])
    require(cfg.augment == "none" or len(task.input_shape) == 3, "augment", cfg.augment,
            f"none for task {task.name!r}: crop_flip needs image inputs (C, H, W)")
    _check_batch_size(cfg, task)
    device = resolve_device(cfg.device)
    require_cuda_policy(device)
    limit_bytes()  # a bad STABKIT_HEAP_KEEP_MB is refused here, where a run is checked
    needed, largest_part = run_bytes(cfg, task, d, algo, torch.finfo(getattr(torch, cfg.dtype)).bits // 8)
    require_memory(needed, f"this run (largest part: {largest_part})",
                   "use fewer --pairs, --clients or clients per round, or a smaller model", device)
    return algo, device


def checked_algorithm(cfg: RunConfig):
    """The algorithm of ``cfg``'s spec (``cfg.algo_spec``: the base with its hyperparameters checked, then its
    wrappers in their order); a plug-in's hooks are wrapped so that what they return is checked on every call."""
    return compose(cfg.algo_spec, guard=lambda algo: CheckedAlgorithm(algo, cfg.algo))


def _check_model(cfg: RunConfig, task: Task, make_module: Callable) -> int:
    """Check the module ``make_module`` builds against ``task``; return its parameter count."""
    with torch.device("meta"):  # counts parameters and validates model/task compatibility, allocating nothing
        module = make_module()
    d = sum(p.numel() for p in module.parameters())
    if d <= CHECK_ON_CPU_PARAMS:  # built for real: meta tensors' first use imports torch's symbolic shapes (~0.6 s)
        with torch.random.fork_rng(devices=[]):
            module = make_module()
    check_module(module, task, cfg.model or task.default_model)
    return d


def _check_batch_size(cfg: RunConfig, task: Task) -> None:
    train_y = task.train_y[:task.num_train_clients]
    largest = max(len(y) for y in train_y)
    require(cfg.batch_size == "full" or cfg.batch_size <= largest, "batch_size", cfg.batch_size,
            f"at most {largest}, the largest client's training set ({task.name}: "
            f"{sum(len(y) for y in train_y):,} training samples over "
            f"{task.num_train_clients} clients); use --batch-size full for full-batch gradients, or more data "
            "per client (fewer --clients)")


def module_maker(cfg: RunConfig, task: Task, model) -> tuple:
    """``(make_module, label)``: a function building a fresh module for the run, and the name config.json
    records (a built-in name, an import path, or a description of a module passed from Python)."""
    if model is None:
        name = cfg.model or task.default_model
        return (lambda: build_model(name, task, hidden=cfg.hidden)), name
    if isinstance(model, nn.Module):
        label = f"instance of {plugins.import_path_of(type(model)) or type(model).__name__}"
        return (lambda: copy.deepcopy(model)), label
    if callable(model):
        label = plugins.import_path_of(model) or getattr(model, "__name__", repr(model))

        def make():
            module = plugins.call("model", label, model, task)
            require(isinstance(module, nn.Module), "model", label,
                    f"a factory returning a torch.nn.Module, but it returned {type(module).__name__}")
            return module

        return make, label
    raise ConfigError(f"invalid model={model!r}: a factory task -> torch.nn.Module, or an nn.Module")
