"""The documentation site as a reader meets it: built strictly (``mkdocs build --strict``, as ``make docs``), every
page opened in headless Chromium at 1280 px, and no table or code block wider than its column -- a wide one scrolls
inside its own box (docs/stylesheets/extra.css), none is cut at the edge or widens the page. Also what the site
promises besides: an index page at /api/, RunConfig and TaskOptions as field tables, one install spelling, and a
README in every example folder whose commands exist as written."""
import functools
import http.server
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.browser import chromium, fits

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 1280

# every table and code block of the page's content column: the box it scrolls in (itself or the nearest
# ancestor that scrolls sideways) must lie inside the column, and no ancestor may cut it off (overflow hidden)
OVERFLOWS = r"""
const column = document.querySelector('.md-content__inner');
const edge = column.getBoundingClientRect();
const out = [];
for (const el of column.querySelectorAll('table, pre > code')) {
  if (!el.getClientRects().length || el.getBoundingClientRect().width === 0) continue;  // hidden (a closed tab)
  let box = null;
  for (let e = el; e && e !== column; e = e.parentElement) {
    const ox = getComputedStyle(e).overflowX;
    if (!box && (ox === 'auto' || ox === 'scroll')) box = e;
    if ((ox === 'hidden' || ox === 'clip') && e.scrollWidth > e.clientWidth + 1) {
      out.push(`${el.tagName} cut off by a ${e.tagName}: ${e.scrollWidth} > ${e.clientWidth} px`);
    }
  }
  const r = (box || el).getBoundingClientRect();
  if (r.right > edge.right + 1 || r.left < edge.left - 1) {
    out.push(`${el.tagName} ${Math.round(r.left)}..${Math.round(r.right)} px outside the column `
             + `${Math.round(edge.left)}..${Math.round(edge.right)} px: ` + el.textContent.replace(/\s+/g, ' ').trim().slice(0, 60));
  }
}
return out;
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def served(site):
    """The built site over HTTP on 127.0.0.1 (an ephemeral port): its base URL."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no line per request in the test's output
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _pages(site: Path) -> list:
    return sorted(str(p.relative_to(site).parent).replace(".", "") for p in site.rglob("index.html")
                  if "assets" not in p.parts)


def test_no_table_or_code_block_overflows_its_column_at_1280_px(site, served):
    pages = _pages(site)
    assert "api" in pages and "atlas" in pages and len(pages) > 20
    problems = {}
    with chromium(WIDTH) as driver:
        for page in pages:
            driver.get(f"{served}/{page}/" if page else f"{served}/")
            found = driver.execute_script(OVERFLOWS)
            width, window = fits(driver)
            if width > window:
                found.append(f"the page is {width} px wide in a {window} px window")
            if found:
                problems[page or "/"] = found
        # the check sees an overflow where there is one: a table forced wider than its box without a scrollbar
        driver.get(f"{served}/atlas/")
        driver.execute_script("for (const e of document.querySelectorAll('.md-typeset__scrollwrap, "
                              ".md-typeset__table')) e.style.overflowX = 'visible';"
                              "document.querySelector('.md-content__inner table').style.minWidth = '3000px';")
        assert driver.execute_script(OVERFLOWS), "the overflow check missed a 3000 px table"
    assert not problems, "\n".join(f"{page}: {'; '.join(found[:3])}" for page, found in problems.items())


def test_api_has_an_index_page_and_field_tables(site):
    index = (site / "api" / "index.html").read_text()
    assert "API reference" in index and 'href="stabkit/"' in index
    page = (site / "api" / "stabkit" / "index.html").read_text()
    from stabkit.config.runconfig import PERTURBATIONS, RunConfig
    from stabkit.config.taskoptions import TaskOptions

    for cls in (RunConfig, TaskOptions):
        for name in cls.__dataclass_fields__:
            assert f"<td><code>{name}</code></td>" in page, f"{cls.__name__}.{name} has no row"
    row = re.search(r"<td><code>perturb</code></td>(.*?)</tr>", page, re.S)[1]
    assert "<code>'client'</code>" in row and all(f"<code>{p}</code>" in row for p in PERTURBATIONS)
    assert "<code>--perturb</code>" in row and "what differs between the runs" in row


def test_one_install_spelling():
    """stabkit installs from its checkout (README): no page names a package index install of stabkit."""
    texts = {p: p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"),
                                        *(ROOT / "examples").rglob("README.md")]}
    wrong = [f"{p.relative_to(ROOT)}: {m[0]}" for p, t in texts.items()
             for m in re.finditer(r"pip install [\"']?stabkit\b[^\n]*", t)]
    assert not wrong, wrong
    from stabkit.extras import install_command

    assert install_command("flower") == "pip install -e \".[flower]\" (in the stabkit checkout)"


@pytest.mark.parametrize("folder", sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_dir()))
def test_every_example_folder_has_a_readme_whose_commands_exist(folder):
    import click

    from stabkit_cli.main import cli as group

    here = ROOT / "examples" / folder
    readme = here / "README.md"
    assert readme.is_file(), f"examples/{folder} has no README.md"
    blocks = re.findall(r"```[a-z]*\n(.*?)```|^    (\S.*)$", readme.read_text(), re.S | re.M)
    lines = [line.split("  #")[0].strip() for block in blocks for text in block for line in text.splitlines()]
    commands = [line for line in lines if line]
    assert commands, f"examples/{folder}/README.md gives no command"
    cwd = ROOT
    for line in commands:
        for part in line.split("&&"):
            args = shlex.split(part)
            if args[0] == "cd":
                cwd = (cwd / args[1]).resolve()
                assert cwd.is_dir(), line
            elif args[0] == "stabkit" and args[1] in group.commands:
                group.commands[args[1]].make_context(args[1], args[2:], parent=click.Context(group))
            elif args[0] in ("python", "python3", ".venv/bin/python"):
                assert (cwd / args[1]).is_file(), line
            elif args[0] == "pip":  # pip install [-e] PATH[EXTRA,...]: the path exists, the extras are declared
                path, _, extras = args[-1].partition("[")
                assert (cwd / path).exists(), line
                declared = (ROOT / "setup.cfg").read_text()
                assert all(f"\n{e} =" in declared for e in extras.rstrip("]").split(",") if e), line
