"""Session fixtures. ``fedyogi``: the example plug-in package examples/fedyogi installed, as a user would
install it, into a throw-away directory (``pip install --target``), not into the environment running the
tests: the tests that use it run stabkit in subprocesses whose ``PYTHONPATH`` holds that directory, so the
running interpreter never sees the plug-in."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from stabkit.engine import machine

machine.apply()  # the test session is an entry point, as the stabkit command is (stabkit.engine.machine)
ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fedyogi"


@pytest.fixture(scope="session", autouse=True)
def one_thread_count():
    """Every run of the session uses one intra-op thread count: the policy's choice, measured once at the start
    (``STABKIT_THREADS``, unless already set). A run measures the idle CPUs when it starts, and results differ in
    the last bits between thread counts (documented in ``stabkit.engine.threads``; config.json records the
    count): two runs compared for determinism must not straddle a moment of load (the first test of a session
    once did, in a fresh clone: round 0's grad_norm_sq differed in the 6th digit)."""
    from stabkit.engine.threads import THREADS_ENV, run_threads

    if THREADS_ENV in os.environ:
        yield
        return
    os.environ[THREADS_ENV] = str(run_threads(float("inf")))
    yield
    os.environ.pop(THREADS_ENV, None)


class Plugin(NamedTuple):
    path: Path  # the example package's source directory
    env: dict  # the environment of a subprocess that has the package installed

    def run(self, args: list, cwd=None) -> str:
        """Run ``python ARGS`` with the package installed; its stdout (a failure shows its stderr)."""
        done = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=self.env,
                              cwd=cwd or ROOT)
        assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
        return done.stdout


@pytest.fixture(scope="session")
def fedyogi(tmp_path_factory) -> Plugin:
    """The example package built from a copy of its sources and installed into a temporary directory."""
    work = tmp_path_factory.mktemp("fedyogi")
    source, site = work / "source", work / "site"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(source)], check=True, capture_output=True)
    path = os.pathsep.join([str(site), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return Plugin(EXAMPLE, {**os.environ, "PYTHONPATH": path})
