"""The documentation site builds strictly, and the repository's prose stands on its own.

`make docs` runs the same build; CI runs it through this test. A strict build fails on a broken link, a missing
page in the navigation (other than the reserved ones, see docs/hooks.py) or an API reference to a name that does
not exist, so the test fails with it.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The development-log voice and references to folders outside the repository.
FORBIDDEN = re.compile(r"\b(this|previous|next|earlier|last) (stop|wave|session)\b|\.\./shared|\.\./papers|"
                       r"\b(fedsagd|fedswa|fedinit|libra)\.md\b", re.IGNORECASE)


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, capture_output=True, text=True,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent)})


def test_site_builds_strictly_with_figures_and_api(tmp_path):
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    site = tmp_path / "site"
    assert (site / "figures" / "demo" / "discrepancy.png").read_bytes() == \
        (ROOT / "figures" / "demo" / "discrepancy.png").read_bytes()
    api = (site / "api" / "stabkit" / "index.html").read_text()
    assert "RunConfig" in api and "run_pair" in api and "load_run" in api
    assert not re.search(r":(class|func|mod):<code>", api)  # Sphinx roles shown as the code they name
    assert 'src="figures/demo/discrepancy.png"' in (site / "index.html").read_text()
    assert 'src="../figures/atlas/curves.png"' in (site / "measurements" / "index.html").read_text()


def test_strict_build_fails_on_a_broken_link(tmp_path):
    """The check above can fail: the same site with one link to a page that does not exist is refused."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "docs", copy / "docs")
    (copy / "figures").mkdir()
    (copy / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text())
    page = copy / "docs" / "errata.md"
    page.write_text(page.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-page.md" in done.stderr


@pytest.mark.parametrize("path", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))])
def test_prose_points_nowhere_outside_and_has_no_log_voice(path):
    text = (ROOT / path).read_text()
    found = [m.group(0) for m in FORBIDDEN.finditer(text)]
    assert not found, f"{path}: {found}"


def test_readme_is_a_front_door_whose_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert targets and [t for t in targets if not (ROOT / t).is_file()] == []
    # two figures: the demo's discrepancy against its bounds at the top, the tuned atlas's stability against
    # accuracy where the README states what the measurements say
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert figures == ["figures/demo/discrepancy.png", "figures/atlas/tuned/stability_accuracy.png"]
    assert text.index("make demo") < text.index("make test") < text.index("## Install without make")


def test_algorithms_page_holds_the_table_stabkit_algos_prints(capsys):
    """One source for the algorithm table: the hyperparameter declarations, printed by `stabkit algos`."""
    from tests.helpers import cli

    code, out, _ = cli(["algos", "--markdown"], capsys)
    assert code == 0 and out.count("\n") > 20
    assert out.strip() in (ROOT / "docs" / "algorithms.md").read_text()


def test_reserved_pages_leave_the_navigation_only_while_absent(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    (tmp_path / "atlas.md").write_text("# Atlas\n")
    nav = [{"Home": "index.md"}, {"Using": [{"Flower": "flower.md"}, {"Atlas": "atlas.md"}]},
           {"Only reserved": [{"Privacy": "privacy.md"}]}, {"Typo": "typo.md"}]
    assert hooks._kept(nav, tmp_path) == [{"Home": "index.md"}, {"Using": [{"Atlas": "atlas.md"}]},
                                          {"Typo": "typo.md"}]  # a page outside RESERVED stays: strict fails on it
