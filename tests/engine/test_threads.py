"""Thread policy: large ops use at most as many threads as CPUs are idle when a run starts."""
import json
import os

import torch

from stabkit import RunConfig, run_pair
from stabkit.engine import threads
from stabkit.engine.threads import SMALL_OP_FLOPS, idle_cpus, run_threads, threads_for


def test_idle_cpus_is_a_share_of_this_process_cpus():
    idle = idle_cpus(0.05)
    assert idle is not None and 0.0 <= idle <= len(os.sched_getaffinity(0)) + 1e-9


def test_busy_machine_gets_one_thread_idle_machine_torch_threads(monkeypatch):
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    monkeypatch.setattr(threads, "idle_cpus", lambda: 0.3)
    assert run_threads(1e9) == 1
    monkeypatch.setattr(threads, "idle_cpus", lambda: 2.6)
    assert run_threads(1e9) == 3
    monkeypatch.setattr(threads, "idle_cpus", lambda: 7.0)
    assert run_threads(1e9) == 4  # never more than torch's own count
    assert run_threads(SMALL_OP_FLOPS / 2) == 1  # small work: one thread, nothing measured
    monkeypatch.setenv(threads.THREADS_ENV, "3")
    assert run_threads(1e9) == 3
    monkeypatch.setenv(threads.THREADS_ENV, "\u00b2")  # a superscript two passes str.isdigit, not int: ignored
    assert run_threads(1e9) == 4


def test_large_ops_run_with_the_chosen_count_and_restore():
    before = torch.get_num_threads()
    with threads_for(1e30, 1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_run_records_its_thread_count(tmp_path, monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    run_pair(RunConfig(rounds=1, pairs=1, constants=False), out=tmp_path / "r")
    assert json.loads((tmp_path / "r" / "config.json").read_text())["threads"] == 1


def test_every_phase_without_a_run_count_takes_the_policy_not_torchs_default(monkeypatch):
    """Constants, flatness and Flower apps call ``threads_for`` without the run's count: on a machine whose CPUs
    are busy they get the idle count (one), never torch's default of one thread per CPU."""
    monkeypatch.delenv(threads.THREADS_ENV, raising=False)
    monkeypatch.setattr(threads, "idle_cpus", lambda window=0.05: 0.4)
    torch.set_num_threads(2)
    try:
        with threads_for(1e12):
            assert torch.get_num_threads() == 1
        with threads_for(0.0):  # a Flower app's clients: small ops
            assert torch.get_num_threads() == 1
        monkeypatch.setattr(threads, "idle_cpus", lambda window=0.05: 2.0)
        with threads_for(1e12):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(2)
