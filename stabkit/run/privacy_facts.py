"""What a DP run's ``config.json`` implies about its privacy schedule (clients, clients per round, clip and noise
multiplier), for ``stabkit privacy`` to hold the run's ``privacy.json`` against
(:func:`stabkit.privacy.report.checked_schedule`): the file is not taken on trust."""
from __future__ import annotations

import dataclasses
from typing import Optional

from stabkit.algorithms import compose
from stabkit.config.runconfig import RunConfig
from stabkit.store.rundir import RunDir


def implied_schedule(run_dir) -> Optional[dict]:
    """``{clients, sampled, clip, noise_multiplier}`` of the run in ``run_dir`` as its config.json gives them
    (a path or a RunDir; None for a run without config.json or without a DP layer)."""
    run = RunDir.of(run_dir)
    if not run.has(RunDir.CONFIG):
        return None
    config = run.config
    cfg = RunConfig.from_dict(config)
    spec = dataclasses.replace(cfg.algo_spec, hp=config.get("hp_resolved", cfg.algo_spec.hp))
    dp = compose(spec).dp_params()
    if dp is None:
        return None
    return {"clients": cfg.task_options.clients, "sampled": cfg.sampled_clients, "clip": dp.clip,
            "noise_multiplier": dp.noise_multiplier}
