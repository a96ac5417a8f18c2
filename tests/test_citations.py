"""Code, command line and tests cite their sources where a reader can find them: the papers (Theorem, Table,
Lemma, App., Eq., Section) or the repository's own docs (docs/bounds.md, docs/bounds-reference.md,
docs/errata.md, docs/papers.md), never notes outside the repository (their file names, section signs, tags or
numbered errata). A paper's section is written "Section 3.2", not with a section sign.

The patterns are the forms such citations took; each is checked to find a planted example and to pass the
legitimate citations above."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("stabkit", "cli", "tests")
SUFFIXES = {".py", ".j2", ".md", ".txt"}

OUTSIDE_NOTES = {
    "a notes file outside the repository": re.compile(r"\b(?:fedsagd|libra|fedinit|fedswa|DESIGN)\.md\b"),
    "a numbered section (cite the paper's Theorem/Table/Section)": re.compile(r"§\s*\d"),
    "a register of open readings": re.compile(r"\bUNCERTAIN\b"),
    "a numbered erratum (cite docs/errata.md or state it)": re.compile(r"\b[Ee]rratum\s+[A-Z]?\d"),
    "an item tag": re.compile(r"\b[LF]-[UT]\d"),
}


def cited_notes(text: str) -> list:
    """What of ``text`` cites notes outside the repository: ``(line number, kind, matched text)``."""
    return [(n, kind, m[0]) for n, line in enumerate(text.splitlines(), 1)
            for kind, pattern in OUTSIDE_NOTES.items() for m in pattern.finditer(line)]


def citations_under(root: Path, rooms=ROOMS, skip=()) -> list:
    """``path:line: kind: text`` for every citation of outside notes in the text files of ``rooms``."""
    return [f"{path.relative_to(root)}:{n}: {kind}: {hit!r}"
            for room in rooms for path in sorted((root / room).rglob("*"))
            if path.suffix in SUFFIXES and path.is_file() and path not in skip
            for n, kind, hit in cited_notes(path.read_text(encoding="utf-8"))]


def test_code_cli_and_tests_cite_papers_and_docs_only():
    found = citations_under(ROOT, skip={Path(__file__).resolve()})
    assert found == [], "cite the paper or the repository's docs instead:\n" + "\n".join(found)


def test_each_kind_of_outside_citation_is_found():
    planted = ["# fedsagd.md §3.5", "see DESIGN.md", "(UNCERTAIN-04)", "libra.md", "erratum 10", "erratum E1",
               "L-U11: safe constant", "fedinit.md F-T1", "§ 2.8"]
    kinds = [{kind for _, kind, _ in cited_notes(text)} for text in planted]
    assert all(kinds), dict(zip(planted, kinds))
    assert set().union(*kinds) == set(OUTSIDE_NOTES)


def test_legitimate_citations_are_not_flagged():
    legitimate = ["FedSAGD paper, Table 1", "Libra, Theorem 3", "FedInit, Theorem 12 (corrected form, docs/errata.md)",
                  "FedSWA paper, Section 3.2 and Algorithm 1", "stabkit/analysis/bounds/libra.py", "bounds/fedinit.py",
                  "docs/bounds-reference.md", "an uncertain reading", "S-R1 (Young's inequality corrected)",
                  "the flatness claims F1-F4", "L-smooth losses", "docs/papers.md lists the errata"]
    assert {text: cited_notes(text) for text in legitimate if cited_notes(text)} == {}


def test_a_planted_citation_in_a_room_is_reported_with_its_place(tmp_path):
    (tmp_path / "stabkit" / "analysis").mkdir(parents=True)
    (tmp_path / "stabkit" / "analysis" / "mod.py").write_text('"""Bounds.\n\nAs in fedswa.md §2.9 (B)."""\n')
    (tmp_path / "stabkit" / "analysis" / "ok.py").write_text('"""FedSWA paper, Theorem 5.1."""\n')
    found = citations_under(tmp_path, rooms=("stabkit",))
    assert found == ["stabkit/analysis/mod.py:3: a notes file outside the repository: 'fedswa.md'",
                     "stabkit/analysis/mod.py:3: a numbered section (cite the paper's Theorem/Table/Section): '§2'"]
