"""``--ship-data``: for Ray clusters without a shared file system. The driver builds each distinct task of a
sweep once (from the data files it has), puts its arrays in Ray's object store once, and every job of that
task reads them there instead of from its node's disk (Ray hands a task's object to each node once, where
its jobs share it).

A task is refused in one line when its arrays exceed ``STORE_SHARE`` of the smallest live node's object
store (Ray reports each node's; by default 30% of the node's memory): a job there could not hold it beside
the objects of the jobs running with it. Stage the files on every node instead.
"""
from __future__ import annotations

from stabkit.config.runconfig import RunConfig
from stabkit.errors import ConfigError
from stabkit.extras import require_extra

STORE_SHARE = 0.5  # a shipped task may take at most this share of the smallest node's object store


def task_key(config: dict) -> tuple:
    """The task a job's config builds (its name and options): jobs with one key share their arrays."""
    cfg = RunConfig.from_dict(config)
    return cfg.task, repr(cfg.task_options)


def task_bytes(task) -> int:
    """The bytes of a task's arrays (every client's training and validation data, and the test split)."""
    parts = [*task.train_x, *task.train_y, *task.val_x, *task.val_y, task.test_x, task.test_y]
    return int(sum(getattr(a, "nbytes", 0) for a in parts))


def check_size(size: int, store_bytes: float, what: str) -> None:
    """Refuse ``size`` bytes of ``what`` above ``STORE_SHARE`` of the smallest node's object store."""
    limit = STORE_SHARE * store_bytes
    if size > limit:
        raise ConfigError(f"invalid ship_data=True: the arrays of {what} are {size / 2**20:.0f} MiB, above "
                          f"{limit / 2**20:.0f} MiB ({STORE_SHARE:.0%} of the smallest node's object store); stage "
                          f"the data files on every node and leave out --ship-data")


def ship_tasks(jobs: list, store_bytes: float) -> dict:
    """``{task key: the object reference of its task}``, each distinct task built here once and put in the
    object store (one line for the first that is too large or cannot be built)."""
    from stabkit.run.preflight import build_checked_task

    ray = require_extra("ray")
    refs: dict = {}
    for job in jobs:
        key = task_key(job.config)
        if key in refs:
            continue
        try:
            task = build_checked_task(RunConfig.from_dict(job.config))
        except ConfigError as e:
            raise ConfigError(f"{e} (sweep job {job.id}, built here for --ship-data)") from None
        check_size(task_bytes(task), store_bytes, f"task {task.name!r} (sweep job {job.id})")
        refs[key] = ray.put(task)
    return refs
