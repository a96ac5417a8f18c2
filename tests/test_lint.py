"""The tree passes `ruff check` with the configuration in pyproject.toml: imports sorted (isort), no unused or
undefined names, pycodestyle errors and warnings."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "stabkit", "cli", "tests", "benchmarks", "examples", "figures", "docs"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]
