"""The checks before a run live in ``stabkit.run.preflight``: sweeps and the atlas validate their jobs
through it without importing the round loop's module, ``PairedRun`` stays small, and preflight refuses a
bad run before anything is built."""
import ast

import pytest

from stabkit.config.runconfig import RunConfig
from stabkit.errors import ConfigError
from stabkit.run.preflight import build_checked_task, check_run, preflight
from stabkit.sweep.jobcheck import check_job_data
from stabkit.sweep.spec import Job
from tests.test_layers import ROOT, _graph

LOOP = "stabkit.run.experiment"
PAIRED_RUN_LINES = 150


def _reaches(graph: dict, start: str) -> set:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += [b for b, _ in graph.get(module, [])]
    return seen


@pytest.mark.parametrize("validator", ["stabkit.run.preflight", "stabkit.sweep.jobcheck", "stabkit.sweep.runner"])
def test_job_validation_does_not_import_the_round_loop(validator):
    """Every import, deferred ones included, followed transitively from the modules that check jobs (the
    sweep's driver checks its jobs; executing them is ``stabkit.sweep.job``'s, which does reach the loop)."""
    graph = _graph()
    assert LOOP in _reaches(graph, "stabkit.sweep.job"), "the reachability check itself must see the loop"
    assert LOOP not in _reaches(graph, validator)


def test_the_atlas_checks_its_jobs_with_the_sweeps_check():
    """The atlas's plan and the sweep's driver both hand their jobs to the executor's ``check``."""
    for path, function in [(("atlas", "runner.py"), "plan_atlas"), (("sweep", "runner.py"), "run_sweep")]:
        tree = ast.parse((ROOT / "stabkit" / path[0] / path[1]).read_text())
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
        calls = {n.func.attr for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "executor"}
        assert "check" in calls, function


def test_paired_run_is_at_most_150_lines():
    tree = ast.parse((ROOT / "stabkit" / "run" / "experiment.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "PairedRun")
    assert cls.end_lineno - cls.lineno + 1 <= PAIRED_RUN_LINES


def _cfg(**kw):
    return RunConfig.from_dict({"algo": "fedavg", "task": "quadratic", "rounds": 2, **kw})


def test_preflight_takes_the_client_counts_from_the_task_and_checks_the_algorithm():
    cfg = _cfg(clients=7)
    checked = preflight(cfg)
    assert (checked.cfg.task_options.clients, checked.task.num_train_clients) == (7, 7)
    assert checked.device.type == "cpu" and type(checked.algo).__name__ == "FedAvg"
    assert [tuple(p.shape) for p in checked.make_module().parameters()] == [(1, 10)]  # quadratic: linear, dim 10
    with pytest.raises(ConfigError, match="invalid hyperparameter 'no_such_hp' for fedavg"):
        preflight(_cfg(hp={"no_such_hp": 1.0}))


def test_check_run_refuses_a_batch_larger_than_every_client():
    cfg = _cfg(clients=4, samples_per_client=10, batch_size=11)
    task = build_checked_task(cfg)
    with pytest.raises(ConfigError, match=r"invalid batch_size=11: .*at most 10"):
        check_run(cfg, task)
    check_run(cfg.replace(batch_size=10), task)


def test_a_sweep_names_the_job_whose_check_fails():
    good, bad = _cfg(samples_per_client=10, batch_size=10).to_dict(), _cfg(samples_per_client=10, batch_size=11).to_dict()
    with pytest.raises(ConfigError, match=r"batch_size=11.*\(sweep job b\)$"):
        check_job_data([Job("a", {}, good), Job("b", {}, bad)])
