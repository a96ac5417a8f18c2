"""setup.cfg installs every package of the tree (a subpackage missing from the list would be absent from a
non-editable install)."""
import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_setup_cfg():
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = {p.strip() for p in cfg["options"]["packages"].split("\n") if p.strip()}
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "stabkit").rglob("__init__.py")}
    assert found | {"stabkit_cli"} == listed
