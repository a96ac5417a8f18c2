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


def test_atlas_templates_are_package_data():
    """The atlas page's Jinja2 templates install with the package (normal and editable installs)."""
    import fnmatch
    from importlib import resources

    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    pattern = cfg["options.package_data"]["stabkit.atlas"].strip()
    templates = sorted(p.relative_to(ROOT / "stabkit" / "atlas").as_posix()
                       for p in (ROOT / "stabkit" / "atlas" / "templates").iterdir())
    assert templates == ["templates/cells.md.j2", "templates/index.html.j2"]
    assert all(fnmatch.fnmatch(t, pattern) for t in templates)
    assert (resources.files("stabkit.atlas") / "templates" / "index.html.j2").is_file()
