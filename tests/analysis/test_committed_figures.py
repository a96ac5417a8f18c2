"""The committed figures cannot go stale: each is redrawn, with the current code, from the committed data it was
drawn from (no training: the demo's two runs are committed in ``figures/demo/data/``, the recipes' sweeps in
``figures/recipes/<recipe>/data/``), and its sidecar -- the
titles, axis labels, legend entries, texts and plotted values (:func:`stabkit.plotting.describe`) -- must
equal the committed one. A change of code that would draw other labels or numbers fails here until the
figures are redrawn with the recipe (``figures/README.md``) and committed.

Also what the demo figure promises a reader who has not read the papers: one panel of the measurement and the
bounds that apply with at most six labelled entries, the failing bounds apart under one legend line, axes named
for what they show, no fitted T* where the fit is degenerate."""
import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest

from stabkit.plotting import SIDECAR, same_figure

ROOT = Path(__file__).resolve().parents[2]
DEMO = ["figures/demo/data/fedsagd", "figures/demo/data/fedavg"]
# the sweep recipes, each committed in figures/recipes/<name>/data (fedswa_flatness/landscape/ is drawn from
# saved models, which are not committed: that subfolder is not redrawn)
SWEEPS = ["fedinit_beta", "fedsagd_fig1_2", "fedswa_flatness", "fedswa_rho", "libra_fig2a_k", "libra_fig2b_decay",
          "libra_fig2c_beta"]
# committed figure folder -> the stabkit command that draws it from committed data ({out}: the folder)
RECIPES = {"figures/demo": ["bounds", *DEMO, "--plot", "--out", "{out}"],
           **{f"figures/recipes/{r}": ["report", f"figures/recipes/{r}/data", "--bootstrap", "0", "--out", "{out}"]
              for r in SWEEPS}}
TABLES = {"figures/demo/fit_table.txt": ["bounds", *DEMO, "--format", "table"]}


def _stabkit(args) -> str:
    """``stabkit ARGS`` in-process from the repository root (the recipes name paths relative to it): stdout."""
    from stabkit_cli.main import main

    out, here = io.StringIO(), os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            main(list(args))
    except SystemExit as e:
        assert not e.code, f"stabkit {' '.join(args)} exited with {e.code}"
    finally:
        os.chdir(here)
    return out.getvalue()


@pytest.fixture(scope="module")
def redrawn(tmp_path_factory) -> dict:
    """Committed folder -> the folder its recipe draws into now."""
    out = {}
    for folder, args in RECIPES.items():
        target = tmp_path_factory.mktemp(Path(folder).name)
        _stabkit([a.replace("{out}", str(target)) for a in args])
        out[folder] = target
    return out


def _sidecar(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("folder", sorted(RECIPES))
def test_committed_figures_are_what_the_code_draws_now(folder, redrawn):
    committed = sorted((ROOT / folder).glob("*.png"))
    assert {p.stem for p in committed} == {p.stem for p in redrawn[folder].glob("*.png")}
    for png in committed:
        name = png.stem + SIDECAR
        assert (png.parent / name).is_file(), f"{png} has no sidecar {name}"
        differences = same_figure(_sidecar(png.parent / name), _sidecar(redrawn[folder] / name), path=name)
        assert not differences, (f"{folder}/{png.name} is stale (redraw it: figures/README.md):\n"
                                 + "\n".join(differences[:10]))


def _tokens(text: str) -> list:
    """The table's words and numbers, numbers as floats: the fits come from scipy and numpy, whose last bits
    may differ on a CPU of another instruction set, and a printed last digit with them."""
    out = []
    for word in re.findall(r"[-+]?\d[\d,]*\.?\d*(?:e[-+]?\d+)?|\S", text):
        try:
            out.append(float(word.replace(",", "")))
        except ValueError:
            out.append(word)
    return out


@pytest.mark.parametrize("path", sorted(TABLES))
def test_committed_tables_are_what_the_code_prints_now(path):
    """Every word as committed, every number within 2e-3 relative (the sidecars' tolerance)."""
    committed, now = _tokens((ROOT / path).read_text()), _tokens(_stabkit(TABLES[path]))
    assert len(committed) == len(now), f"{path} is stale (redraw it: figures/README.md)"
    for a, b in zip(committed, now):
        same = a == pytest.approx(b, rel=2e-3, abs=1e-12) if isinstance(a, float) and isinstance(b, float) else a == b
        assert same, f"{path} is stale (redraw it: figures/README.md): {a!r} is now {b!r}"


def test_figures_readme_gives_each_recipe():
    readme = (ROOT / "figures" / "README.md").read_text()
    for folder, args in {**RECIPES, **TABLES}.items():
        command = "stabkit " + " ".join(a.replace("{out}", folder) for a in args)
        assert command in readme, command


def test_sidecar_differences_are_found(redrawn):
    """The comparison the staleness test relies on sees a changed label and a changed number."""
    good = _sidecar(ROOT / "figures/demo/discrepancy" f"{SIDECAR}")
    assert same_figure(good, good) == []
    changed = json.loads(json.dumps(good))
    changed["axes"][1]["legend"][0] += " (renamed)"
    changed["axes"][1]["lines"][0]["y"][-1] *= 1.01
    found = same_figure(good, changed)
    assert len(found) == 2 and "axes[1].legend[0]" in found[0] and "lines[0].y" in found[1]


def test_demo_figure_reads_without_the_papers():
    fig = _sidecar(ROOT / "figures/demo/discrepancy" f"{SIDECAR}")
    fit, valid, failing = fig["axes"]
    measured = [e for e in valid["legend"] if e.endswith(": measured")]
    bounds = [e for e in valid["legend"] if ", bound: " in e]
    assert len(measured) == 2 and len(bounds) >= 2 and len(valid["legend"]) <= 6
    assert len(failing["legend"]) == 1 and "conditions fail" in failing["legend"][0]
    every = " ".join(valid["legend"] + failing["legend"] + fit["legend"])
    assert "§" not in every and "conditions fail" not in " ".join(valid["legend"])
    for ax in fig["axes"]:
        assert "distance" in ax["ylabel"] and ax["xlabel"] == "round t"
    # every bound named in the panel is one whose conditions hold in the fit table
    table = (ROOT / "figures/demo/fit_table.txt").read_text()
    assert "FedSAGD Table 1" in " ".join(bounds) and "fedsagd:fedsagd.table1             disc" in table


def test_libra_figure_draws_no_fitted_t_star_where_the_fit_is_degenerate():
    blocks = (ROOT / "figures/demo/fit_table.txt").read_text().split("\n\n== ")
    panels = [ax for ax in _sidecar(ROOT / "figures/demo/libra" f"{SIDECAR}")["axes"] if ax["legend"]]
    assert len(panels) == len(blocks) == 2
    for ax in panels:
        label = ax["title"].split(": ", 1)[1]
        block = next(b for b in blocks if f"[{label}, " in b)
        degenerate = "no fitted T*" in block  # as `stabkit bounds` says
        assert any(e.startswith("fitted T*") for e in ax["legend"]) == (not degenerate), label
        assert any("degenerate" in e for e in ax["legend"]) == degenerate, label
