"""The tree passes `ruff check` with the configuration in pyproject.toml: imports sorted (isort), no unused or
undefined names, pycodestyle errors and warnings."""
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the test extras (setup.cfg)"
    done = subprocess.run([ruff, "check", "stabkit", "cli", "tests", "benchmarks", "examples", "figures"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
