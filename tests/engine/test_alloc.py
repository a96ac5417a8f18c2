"""The allocator policy (stabkit.engine.alloc): glibc serves every block from its heap and keeps freed memory
for reuse, gives it back when a run's rounds end, runs give the same numbers with and without it, and a run
states once which allocator it uses. Each check runs in its own process: the policy is applied once per
process, for good."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the policy is for Linux's glibc")


def _python(code: str, **env) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "LD_PRELOAD"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**clean, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


HEAP = """
from stabkit.engine import alloc
print(alloc.keep_freed_memory(), alloc.keeps_freed_blocks())  # before torch's import, as the stabkit command does
import torch
MB = 1 << 20
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) // 1024
a = torch.ones(64 * MB // 4); peak = rss(); del a
print(rss() > peak - 8)                                            # freed, and kept by glibc (no munmap, no trim)
before = rss()
alloc.release(); print(rss() < before - 56)                        # malloc_trim(0): given back
print(alloc.policy())
"""


def test_large_blocks_come_from_glibcs_heap_stay_when_freed_and_go_back_on_release():
    """What the policy guarantees on every Linux/glibc host: the settings take effect, a freed 64 MiB block stays
    in the process (no munmap: it came from the heap, below the trim threshold) and :func:`release` hands it
    back. Where glibc places the next aligned block of that size (in the kept memory or past it) is its own
    choice and differs between hosts; ``benchmarks/allocator.py --reuse-probe`` measures how often it is reused
    (docs/performance-engine.md says on which hosts)."""
    out = _python(HEAP, STABKIT_HEAP_KEEP_MB="1000").splitlines()
    assert out[:3] == ["True True", "True", "True"]
    assert out[3] == ("allocator: glibc, every block from its heap, up to 1,000 MiB of freed memory kept for reuse "
                      "(STABKIT_HEAP_KEEP_MB)")


@pytest.mark.parametrize("env,line", [
    ({"STABKIT_CPU_CACHE_MB": "0"}, "allocator: glibc, blocks of 32 MiB and more mmapped afresh (STABKIT_CPU_CACHE_MB, "
                                    "renamed STABKIT_HEAP_KEEP_MB=0)"),
    ({"STABKIT_HEAP_KEEP_MB": "0"}, "allocator: glibc, blocks of 32 MiB and more mmapped afresh (STABKIT_HEAP_KEEP_MB=0)"),
    ({"MALLOC_ARENA_MAX": "2"}, "allocator: glibc as the MALLOC_* variables set it; stabkit's policy not applied"),
])
def test_the_policy_says_when_it_keeps_nothing_or_the_user_chose(env, line):
    out = _python("from stabkit.engine import alloc\nprint(alloc.keep_freed_memory(), alloc.keeps_freed_blocks())\n"
                  "alloc.release(); print(alloc.policy())", **env).splitlines()
    assert out == [str("MALLOC_ARENA_MAX" not in env) + " False", line]


RUN = """
from stabkit.engine import machine
machine.apply()  # the entry points' policy, as the stabkit command applies it
from stabkit import RunConfig
from stabkit.engine import alloc
from stabkit.run.experiment import PairedRun
from stabkit.run.loop import run_rounds
from benchmarks.workloads import image_task, _federation
cfg = RunConfig(task="synthetic", model="fedavg_cnn", pairs=1, clients_per_round=6, local_steps=2, batch_size=4,
                lr=0.05, rounds=3, constants=False, local_rounds=(), task_options=_federation(8, 8))
run = PairedRun(cfg, task=image_task(8, 8, (3, 32, 32)))
eng = run.engine
assert 2 * eng.s * eng.x.shape[-1] * 4 >= 32 << 20  # the round's client tensors are large blocks
rec = run_rounds(run).record  # the round loop (stabkit.run.loop), no callbacks: nothing written
print(eng.x.double().sum().item().hex(), eng.discrepancy()[0].item().hex(), rec.theta_max[0].item().hex())
print(alloc.keeps_freed_blocks())
"""


def test_a_run_gives_the_same_numbers_with_and_without_the_policy():
    kept = _python(RUN).splitlines()
    plain = _python(RUN, STABKIT_HEAP_KEEP_MB="0").splitlines()
    assert kept[1] == "True" and plain[1] == "False"
    assert kept[0] == plain[0]


def test_a_run_gives_the_memory_back_when_its_rounds_end(tmp_path):
    out = _python(RUN.split("run = PairedRun")[0] + f"""
from stabkit.run.experiment import run_pair
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) << 10
given, release = [], alloc.release
def spy():
    before = rss()
    release()
    given.append(before - rss())
alloc.release = spy
run_pair(cfg, out={str(tmp_path / "r")!r}, task=image_task(8, 8, (3, 32, 32)))
print(given[-1] >= 32 << 20)  # the last call: the end of the rounds (the memory checks call it before them)
""")
    assert out.split()[-1:] == ["True"]


def test_a_bad_limit_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from tests.helpers import cli
    monkeypatch.setenv("STABKIT_HEAP_KEEP_MB", "lots")
    monkeypatch.setattr("stabkit.engine.alloc._policy", None)
    code, _, err = cli(["pair", "--rounds", "1", "--no-constants", "--out", str(tmp_path / "r")], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "invalid STABKIT_HEAP_KEEP_MB 'lots'" in lines[0] and "MiB" in lines[0]
    assert not (tmp_path / "r" / "metrics.csv").exists()


def test_a_run_states_its_allocator_once_with_verbose_and_always_records_it(tmp_path):
    code = """
from stabkit_cli.main import main
main(["pair", "--rounds", "1", "--pairs", "1", "--no-constants", "--quiet", "--overwrite", "--out", {out!r}{extra}])
"""
    line = ("allocator: glibc, every block from its heap, up to 700 MiB of freed memory kept for reuse "
            "(STABKIT_HEAP_KEEP_MB)")
    out_dir = str(tmp_path / "r")
    plain = _python(code.format(out=out_dir, extra=""), STABKIT_HEAP_KEEP_MB="700")
    assert "allocator:" not in plain  # a line a user cannot act on: only asked for
    verbose = _python(code.format(out=out_dir, extra=', "--verbose"'), STABKIT_HEAP_KEEP_MB="700")
    assert verbose.count("allocator:") == 1 and line in verbose.splitlines()
    recorded = json.loads((tmp_path / "r" / "config.json").read_text())
    assert (recorded["allocator"], recorded["heap_keep_mb"]) == (line, 700)
    from stabkit import RunConfig
    assert RunConfig.from_dict(recorded).rounds == 1  # read back: facts, not configuration


def test_the_command_and_sweep_workers_apply_the_policy_before_torch_is_imported():
    """Applied after torch's import, glibc's heap often took a few rounds more to settle (stabkit.engine.alloc)."""
    out = _python("""
import sys
import stabkit_cli.main
from stabkit.engine import alloc
print("torch" in sys.modules, alloc.keeps_freed_blocks())
import concurrent.futures as cf, multiprocessing
from stabkit.sweep import executors
with cf.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"),
                            initializer=executors.machine.apply) as pool:
    print(pool.submit(alloc.keeps_freed_blocks).result())
""")
    assert out.split() == ["False", "True", "True"]


def test_importing_stabkit_or_building_a_run_changes_nothing_of_the_process():
    """The machine policy is the entry points' (stabkit.engine.machine): importing stabkit, resolving a device
    and building a run leave the environment, the allocator and the TF32 flags as they were."""
    out = _python("""
import os
env = dict(os.environ)
import stabkit
from stabkit.engine import alloc
from stabkit.run.preflight import resolve_device
import torch
tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
resolve_device("cpu")
stabkit.PairedRun(stabkit.RunConfig(rounds=1, pairs=1, constants=False))
print(dict(os.environ) == env, alloc.keeps_freed_blocks(),
      (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == tf32)
""")
    assert out.split() == ["True", "False", "True"]
