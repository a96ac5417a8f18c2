"""A checked run's parts assembled: the neighbours, the data on the device, the evaluation schedule, the flat
model and the paired engine at the initial parameters.

``PairedRun`` is built from these parts, and the checks of a sweep's or an atlas's jobs try a plug-in
algorithm's hooks on an engine assembled the same way (:func:`try_plugin_round`) without importing the round
loop's module: a plug-in refused by ``stabkit pair`` is refused by them, up front, in the same words.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import torch

from stabkit.algorithms import is_builtin
from stabkit.config.runconfig import RunConfig
from stabkit.engine.data import FederatedData
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.paired import EngineSettings, PairedEngine
from stabkit.engine.perturbation import Neighbours, build_neighbours
from stabkit.run.evalbudget import EvalPlan, run_plan
from stabkit.run.init import initial_parameters
from stabkit.run.preflight import Checked, preflight
from stabkit.tasks.base import Task


@dataclass
class Assembly:
    """The parts of a run; ``cfg`` is the checked one with the evaluation schedule chosen."""

    cfg: RunConfig
    nb: Neighbours
    data: FederatedData
    eval_plan: EvalPlan
    model: FlatModel
    engine: PairedEngine


def engine_settings(cfg: RunConfig) -> EngineSettings:
    """The fields of ``cfg`` the engine reads."""
    return EngineSettings(**{f.name: getattr(cfg, f.name) for f in dataclasses.fields(EngineSettings)})


def assemble(checked: Checked) -> Assembly:
    """Allocate the run ``checked`` describes; a plug-in algorithm, or what a DP layer wraps, is tried on round 1
    (and its state outside the tensors checked for saving when checkpoints are on) before anything is written."""
    cfg, task = checked.cfg, checked.task
    dtype = getattr(torch, cfg.dtype)
    nb = build_neighbours(task, cfg.perturb, cfg.client_mode, cfg.pairs, cfg.seed)
    data = FederatedData(task, nb.extra, dtype, checked.device)
    plan = run_plan(cfg, data, task.num_train_clients)
    cfg = cfg.replace(eval_every=plan.every, eval_fraction=plan.fraction)
    model = FlatModel(checked.make_module(), task.kind, dtype, checked.device)
    theta0 = initial_parameters(cfg.init, cfg.seed, cfg.pairs, checked.make_module, model)
    engine = PairedEngine(engine_settings(cfg), checked.algo, model, data, nb, theta0)
    if not is_builtin(cfg.algo) or checked.algo.dp_params() is not None:
        engine.try_round()
        if cfg.checkpoint_every:  # state kept outside the tensors that cannot be saved: refused here
            checked.algo.host_state()
    return Assembly(cfg, nb, data, plan, model, engine)


def try_plugin_round(cfg: RunConfig, task: Optional[Task] = None) -> None:
    """Build the run ``cfg`` on ``task`` as ``stabkit pair`` builds it, trying a plug-in's hooks on round 1;
    writes nothing."""
    assemble(preflight(cfg, task))
