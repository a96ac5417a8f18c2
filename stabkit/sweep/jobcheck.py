"""``check_job_data``: every job of a sweep checked on its data as ``stabkit pair`` checks a run, before
anything is written (data files present and well-formed, model against task, batch size, device, memory;
a plug-in algorithm's hooks tried on one round), so that a sweep whose data is missing fails at once, not
job by job. An executor calls it where its workers read the same files (:meth:`LocalExecutor.check`).
"""
from __future__ import annotations

import json

from stabkit.config.runconfig import RunConfig
from stabkit.errors import ConfigError


def check_job_data(jobs: list) -> None:
    """Check every job on its task (built once per distinct task and options), a plug-in algorithm's hooks
    on a round of its first job per task and hyperparameters, exactly as ``stabkit pair`` tries them; a
    one-line error names the job."""
    from stabkit.algorithms import is_builtin
    from stabkit.run.assembly import try_plugin_round  # imported on use: torch
    from stabkit.run.preflight import build_checked_task, check_run

    by_task: dict = {}
    checked = set()  # jobs that differ only in their seed are checked once: nothing checked here reads it
    for job in jobs:
        same = json.dumps({k: v for k, v in job.config.items() if k != "seed"}, sort_keys=True, default=str)
        if same not in checked:
            checked.add(same)
            cfg = RunConfig.from_dict(job.config)
            by_task.setdefault((cfg.task, cfg.task_options), []).append((job, cfg))
    for group in by_task.values():
        task, tried = None, set()
        for job, cfg in group:
            try:
                task = task or build_checked_task(cfg)
                check_run(cfg, task)
                plugin = (cfg.algo, json.dumps(cfg.hp, sort_keys=True, default=str))
                if not is_builtin(cfg.algo) and plugin not in tried:
                    tried.add(plugin)
                    try_plugin_round(cfg, task)  # builds the run and tries its hooks on round 1; writes nothing
            except ConfigError as e:
                raise ConfigError(f"{e} (sweep job {job.id})") from None
