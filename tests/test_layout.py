"""docs/layout.md is what docs/gen_layout.py writes from the code (LAYERS of tests/test_layers.py and the rooms'
docstrings), so it cannot go stale, and it names every room of stabkit/."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gen():
    spec = importlib.util.spec_from_file_location("gen_layout", ROOT / "docs" / "gen_layout.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_committed_page_is_what_the_generator_writes(gen):
    assert (ROOT / "docs" / "layout.md").read_text() == gen.render(), \
        "docs/layout.md is stale: run python docs/gen_layout.py and commit it"


def test_every_room_of_stabkit_and_the_cli_appears_in_layer_order(gen):
    page = (ROOT / "docs" / "layout.md").read_text()
    rooms = [f"{p.name}/" for p in sorted((ROOT / "stabkit").iterdir()) if (p / "__init__.py").is_file()]
    rooms += [p.name for p in sorted((ROOT / "stabkit").glob("*.py")) if p.name != "__init__.py"]
    rooms += ["stabkit/__init__.py", "cli/"]
    sections = re.findall(r"^### `([^`]+)` \(layer (\d+)\)$", page, re.MULTILINE)
    assert sorted(name for name, _ in sections) == sorted(rooms)
    expected = [(gen.label(n), str(i)) for i, layer in enumerate(gen.layers(), 1) for n in layer]
    assert sections == expected
    assert sections[0] == ("stabkit/__init__.py", "1") and sections[-1][0] == "cli/"
    assert ("store/", "4") in sections and ("sweep/", "14") in sections and ("fixtures.py", "14") in sections


def test_the_intro_claims_hold():
    """`analysis/` never imports `engine/`, and `engine/` imports nothing of `config/` (the RunConfig)."""
    from tests.test_layers import _graph

    graph = _graph()
    assert [(a, b) for a, targets in graph.items() if a.startswith("stabkit.analysis")
            for b, _ in targets if b.startswith("stabkit.engine")] == []
    assert [(a, b) for a, targets in graph.items() if a.startswith("stabkit.engine")
            for b, _ in targets if b.startswith("stabkit.config")] == []


def test_page_states_each_docstring_and_examples_folder(gen):
    page = (ROOT / "docs" / "layout.md").read_text()
    store = gen.docstring(ROOT / "stabkit" / "store" / "__init__.py", whole=True)
    assert store.startswith("The run store") and store in page
    assert "Modules: `atomic`, `checkpoint`," in page  # the store's files, listed from the folder
    assert gen.docstring(ROOT / "stabkit" / "errors.py", whole=False) == "The one exception type for user mistakes."
    for folder in (p for p in (ROOT / "examples").iterdir() if p.is_dir()):
        assert f"* `examples/{folder.name}/`: " in page


def test_layers_are_parsed_from_the_layering_test_not_imported(gen, tmp_path):
    fake = tmp_path / "test_layers.py"
    fake.write_text('import nothing_here\nLAYERS = [("stabkit",), ("stabkit.store", "stabkit.run")]  # comment\n')
    assert gen.layers(fake) == [("stabkit",), ("stabkit.store", "stabkit.run")]
    (tmp_path / "empty.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="no LAYERS"):
        gen.layers(tmp_path / "empty.py")


def test_check_mode_reports_a_stale_page(gen, tmp_path, monkeypatch, capsys):
    stale = tmp_path / "layout.md"
    stale.write_text(gen.render().replace("## Rules the tests hold", "## Rules"))
    monkeypatch.setattr(gen, "PAGE", stale)
    monkeypatch.setattr(gen, "ROOT", ROOT)
    assert gen.main(["--check"]) == 1 and "is stale" in capsys.readouterr().err
    assert gen.main([]) == 0 and gen.main(["--check"]) == 0
