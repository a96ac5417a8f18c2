"""stabkit's caching CPU allocator (stabkit.engine.cpucache): large blocks are reused, the cache stays within
its limit, runs give the same numbers with and without it, and without a compiler torch's allocator stays.
Each check runs in its own process: the allocator is installed once per process, for good."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MB = 1 << 20

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cache is built on Linux only")


def _python(code: str, **env) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _compiler() -> bool:
    import shutil
    return bool(os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++"))


needs_compiler = pytest.mark.skipif(not _compiler(), reason="no C++ compiler: torch's allocator stays (tested below)")


@needs_compiler
def test_large_blocks_are_reused_and_the_cache_stays_within_its_limit():
    out = _python("""
import torch
from stabkit.engine import cpucache
MB = 1 << 20
assert cpucache.install()
s = lambda: cpucache.stats()
a = torch.empty(40 * MB // 4); p = a.data_ptr(); del a
print(s()["cached"] // MB, s()["hits"], s()["misses"])            # 40 0 1
b = torch.empty(40 * MB // 4); print(b.data_ptr() == p, p % (2 * MB), s()["cached"] // MB, s()["hits"])  # True 0 0 1
c = torch.empty((39 * MB + 1) // 4 + 1)                           # rounded up to 40 MB: no block free, a miss
c.fill_(3.0); del b, c
print(s()["cached"] // MB, s()["misses"])                         # 80 2
d = torch.empty(60 * MB // 4); del d                              # 140 > 100: the least recently freed goes
print(s()["cached"] // MB)                                        # 100
e = torch.empty(MB // 4); del e                                   # small blocks stay with glibc
print(s()["cached"] // MB, s()["limit"] // MB)                    # 100 100
f = torch.empty(120 * MB // 4); del f                             # larger than the limit: not kept
print(s()["cached"] // MB)                                        # 100
g = torch.arange(10 * MB, dtype=torch.float32)                    # a reused block holds what is written
print(float(g[-1]) == 10 * MB - 1)
cpucache.release(); print(s()["cached"])                          # 0
""", STABKIT_CPU_CACHE_MB="100")
    assert out.split("\n")[:-1] == ["40 0 1", "True 0 0 1", "80 2", "100", "100 100", "100", "True", "0"]


@needs_compiler
def test_cached_blocks_go_back_before_a_new_block_when_the_system_is_short_of_memory():
    """Linux overcommits, so a fresh block does not fail when memory runs out (the OOM killer strikes): the cache
    frees what it holds first, least recently freed first, until the block and 512 MB of headroom are there."""
    out = _python("""
import torch
from stabkit.engine import cpucache
MB = 1 << 20
assert cpucache.install()
s = lambda: cpucache.stats()["cached"] // MB
a, b, c = (torch.empty(n * MB // 4) for n in (40, 50, 60)); del a, b, c
print(s())                                                        # 150
cpucache.assume_available(560 * MB)                               # 64 + 512 wanted, 560 there: free >= 16 MB
d = torch.empty(64 * MB // 4); print(s())                         # the 40 MB block went: 110
cpucache.assume_available(10 ** 12); del d                        # plenty again: blocks are kept
e = torch.empty(70 * MB // 4); print(s())                         # 174
cpucache.assume_available(0)
f = torch.empty(80 * MB // 4); print(s())                         # nothing available: everything goes, 0
cpucache.assume_available(None)
""", STABKIT_CPU_CACHE_MB="1000")
    assert out.split("\n")[:-1] == ["150", "110", "174", "0"]


RUN = """
import torch
from stabkit import RunConfig
from stabkit.engine import cpucache
from stabkit.run.experiment import PairedRun
from benchmarks.workloads import image_task, _federation
cfg = RunConfig(task="synthetic", model="fedavg_cnn", pairs=1, clients_per_round=6, local_steps=2, batch_size=4,
                lr=0.05, rounds=3, constants=False, local_rounds=(), task_options=_federation(8, 8))
run = PairedRun(cfg, task=image_task(8, 8, (3, 32, 32)))
eng = run.engine
assert 2 * eng.s * eng.x.shape[-1] * 4 >= 32 << 20  # the round's client tensors are large blocks
for t in range(3):
    rec = eng.step(t)
print(eng.x.double().sum().item().hex(), eng.discrepancy()[0].item().hex(), rec.theta_max[0].item().hex())
print(cpucache.stats()["installed"], cpucache.stats()["hits"] > 0)
"""


@needs_compiler
def test_a_run_gives_its_cached_blocks_back_when_its_rounds_end(tmp_path):
    out = _python(RUN.split("run = PairedRun")[0] + f"""
from stabkit.run.experiment import run_pair
seen = []
run_pair(cfg, out={str(tmp_path / "r")!r}, task=image_task(8, 8, (3, 32, 32)),
         progress=lambda t, stats: seen.append(cpucache.stats()["cached"]))
print(max(seen) >= 32 << 20, cpucache.stats()["cached"])
""")
    assert out.split() == ["True", "0"]


@needs_compiler
def test_a_run_gives_the_same_numbers_with_and_without_the_cache():
    cached = _python(RUN).split("\n")
    plain = _python(RUN, STABKIT_CPU_CACHE_MB="0").split("\n")
    assert cached[1] == "True True" and plain[1] == "False False"
    assert cached[0] == plain[0]


def test_without_a_compiler_torchs_allocator_stays(tmp_path):
    out = _python("""
import torch
from stabkit.engine import cpucache
print(cpucache.install(), cpucache.stats()["installed"])
from stabkit.engine.alloc import keep_freed_memory
keep_freed_memory()  # the engine's call: still no cache, no error
x = torch.ones(40 << 18); print(float(x.sum()))
""", CXX="/bin/false", XDG_CACHE_HOME=str(tmp_path))
    assert out.split() == ["False", "False", str(float(40 << 18))]
    assert not list((tmp_path / "stabkit").glob("*.so*"))  # the failed build left nothing behind


def test_a_bad_cache_limit_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from tests.helpers import cli
    monkeypatch.setenv("STABKIT_CPU_CACHE_MB", "lots")
    code, _, err = cli(["pair", "--rounds", "1", "--no-constants", "--out", str(tmp_path / "r")], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "invalid STABKIT_CPU_CACHE_MB 'lots'" in lines[0] and "MiB" in lines[0]
    assert not (tmp_path / "r" / "metrics.csv").exists()


def test_a_run_records_the_cache_limit_as_a_fact(tmp_path):
    import json

    from stabkit import RunConfig, run_pair
    from stabkit.engine import cpucache
    run_pair(RunConfig(rounds=1, pairs=1, constants=False), out=tmp_path / "r")
    recorded = json.loads((tmp_path / "r" / "config.json").read_text())
    assert recorded["cpu_cache_mb"] == cpucache.stats()["limit"] >> 20
    assert (recorded["cpu_cache_mb"] > 0) == (cpucache.stats()["installed"] and cpucache.limit_bytes() >= 1 << 20)
    assert RunConfig.from_dict(recorded).rounds == 1  # read back: a fact, not configuration
