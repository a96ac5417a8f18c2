"""The numbers the README and the docs state, re-derived from where they say they come from (the cheap ones).

The demo's numbers come from its fit table, ``figures/demo/fit_table.txt``, which
``tests/analysis/test_committed_figures.py`` holds equal to what ``stabkit bounds`` prints now from the committed
runs; here each sentence that quotes the table is read back and compared with it at the precision it is written
in (a changed demo changes the table, and these sentences must follow). The counts of algorithms and atlas rows
come from the code."""
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "figures" / "demo" / "fit_table.txt"


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _agrees(stated: str, value: float) -> bool:
    """``stated`` is ``value`` rounded to the digits it shows (``77,800``: to the hundred; ``80,000``: to the ten
    thousand), with 5% of a half unit to spare for the table's own rounding (0.105 there may be 0.1054)."""
    digits = stated.replace(",", "").replace(".", "").lstrip("0")
    significant = max(1, len(digits.rstrip("0")) if "." not in stated else len(digits))
    unit = 10 ** (math.floor(math.log10(abs(_number(stated)))) - significant + 1)
    return abs(_number(stated) - value) <= 0.5 * unit * 1.05


def _fit_table() -> dict:
    """Per run (label) its D_T, D_T std, saturation ratio and the bound/measured ratios of its valid bounds."""
    runs = {}
    for block in TABLE.read_text().split("\n\n"):
        label = re.search(r"\[(\w+), --perturb", block).group(1)
        d = re.search(r"D_T = ([\d.]+) ± ([\d.]+)", block)
        ratio = re.search(r"\(ratio ([\d.]+)\)", block)
        valid = [float(line.split()[5]) for line in block.splitlines()
                 if re.match(r"\S+\s+\S+\s+\S+\s+True\s", line)]
        runs[label] = {"D_T": float(d.group(1)), "std": float(d.group(2)),
                       "ratio": float(ratio.group(1)) if ratio else None, "valid": valid}
    return runs


# (file, what it says, pattern whose groups are the stated numbers, the values they must be)
CLAIMS = [
    ("README.md", "valid bounds' range", r"Every valid bound\s+holds, ([\d,.]+) to ([\d,.]+) times above",
     lambda t: [min(v for r in t.values() for v in r["valid"]), max(v for r in t.values() for v in r["valid"])]),
    ("docs/bounds.md", "valid bounds' range", r"Every valid bound holds on these two runs, ([\d,.]+)–([\d,.]+)×",
     lambda t: [min(v for r in t.values() for v in r["valid"]), max(v for r in t.values() for v in r["valid"])]),
    ("README.md", "D_T of both runs", r"FedSAGD \(([\d.]+) ± ([\d.]+) after 100\s+rounds\) and FedAvg \(([\d.]+) ± ([\d.]+)\)",
     lambda t: [t["fedsagd"]["D_T"], t["fedsagd"]["std"], t["fedavg"]["D_T"], t["fedavg"]["std"]]),
    ("docs/bounds.md", "D_T of both runs", r"([\d.]+) ± ([\d.]+) vs ([\d.]+) ± ([\d.]+) after 100 rounds",
     lambda t: [t["fedsagd"]["D_T"], t["fedsagd"]["std"], t["fedavg"]["D_T"], t["fedavg"]["std"]]),
    ("README.md", "saturation rate over Gamma", r"levels off at a rate\s+(\d+)\s+times",
     lambda t: [t["fedsagd"]["ratio"]]),
]


@pytest.mark.parametrize("path,what,pattern,derive", CLAIMS, ids=[f"{c[0]}: {c[1]}" for c in CLAIMS])
def test_demo_numbers_are_the_fit_tables(path, what, pattern, derive):
    text = (ROOT / path).read_text()
    found = re.search(pattern, text)
    assert found, f"{path} no longer says the {what} in the form this test reads: update CLAIMS"
    values = derive(_fit_table())
    for stated, value in zip(found.groups(), values):
        # an integer ratio may be the truncated value (82 for 82.5)
        ok = _agrees(stated, value) or "." not in stated and int(value) == _number(stated)
        assert ok, f"{path} states the {what} as {stated}; figures/demo/fit_table.txt gives {value:.4g}"


def test_algorithm_and_atlas_row_counts_are_the_codes():
    """'23 algorithms' beside an atlas of '24' rows: both counts, and the word that reconciles them."""
    from stabkit.algorithms import ALGORITHMS
    from stabkit.atlas.aliases import fold_aliases
    from stabkit.atlas.runner import resolve_algos

    algorithms, rows = len(ALGORITHMS), len(fold_aliases(resolve_algos(None))[0])
    readme = (ROOT / "README.md").read_text()
    for doc in ("README.md", "docs/index.md"):
        assert f"the {algorithms} algorithms (DP-FedAvg included)" in (ROOT / doc).read_text(), doc
    assert f"# {rows} rows (the {algorithms} algorithms, FOSM as FedAvgM, DP-FedAvg at 3 noise levels) x 3 tasks" in readme
    assert f"three noise multipliers: {rows} rows" in (ROOT / "docs" / "atlas.md").read_text()


def test_agreement_rule():
    assert _agrees("117", 117.0) and _agrees("77,800", 7.78e4) and _agrees("3.02", 3.023)
    assert not _agrees("150", 117.0) and not _agrees("70,000", 7.78e4) and _agrees("80,000", 7.78e4) and not _agrees("0.22", 0.224 * 1.1)
