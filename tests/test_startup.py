"""Start-up: the listing commands import none of the heavy libraries (each costs 0.2-2 s at start-up)."""
import subprocess
import sys

import pytest

HEAVY = ("torch", "pandas", "scipy", "matplotlib", "ray")
PROBE = """
import contextlib, io, sys
from stabkit_cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main({args!r})
    except SystemExit as e:
        assert not e.code, e.code
assert out.getvalue().strip()
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("args", [["--help"], ["algos"], ["presets"], ["models"], ["pair", "--help"],
                                  ["sweep", "--help"], ["bounds", "--help"], ["report", "--help"]])
def test_light_commands_import_no_heavy_library(args):
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"stabkit {' '.join(args)} imported {done.stdout.strip()}"
