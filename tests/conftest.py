"""Session fixtures. ``fedyogi``: the example plug-in package examples/fedyogi installed (editable, no
dependencies, no build isolation) into the environment running the tests, as a user would install it; a
fresh CI checkout installs it here, an already installed one is reused."""
import importlib
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "fedyogi"


def _installed_here() -> bool:
    try:
        dist = metadata.distribution("stabkit-fedyogi")
    except metadata.PackageNotFoundError:
        return False
    origin = dist.read_text("direct_url.json") or ""  # where it was installed from
    return any(ep.group == "stabkit.algorithms" for ep in dist.entry_points) and (
        EXAMPLE.as_uri() in origin or str(EXAMPLE) in origin)


@pytest.fixture(scope="session")
def fedyogi():
    """The example package's directory, after making sure it is installed in this environment."""
    if not _installed_here():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "-e", str(EXAMPLE)], check=True, capture_output=True)
        importlib.invalidate_caches()
        if str(EXAMPLE) not in sys.path:  # this process has read its .pth files already; new ones have not
            sys.path.append(str(EXAMPLE))
    assert _installed_here()
    return EXAMPLE
