"""The one plotting module: matplotlib's Agg backend (figures are files, no display), the house style, distinct
colours, markers and line styles, and saving a figure as PNG and PDF with its sidecar.

The sidecar ``<name>.figure.json`` beside each PNG holds what a reader takes from the figure -- titles, axis
labels and scales, legend entries, texts, table cells and every line's plotted values (4 significant digits)
-- so a test can redraw a committed figure from its committed data and fail when the code would now draw
other labels or numbers (:func:`describe`, :func:`same_figure`).

Every figure of stabkit (``stabkit bounds --plot``: :mod:`stabkit.analysis.plots`; ``stabkit landscape --plot``:
:mod:`stabkit.flatness.plots`; ``stabkit report``: :mod:`stabkit.sweep.report`, :mod:`stabkit.flatness.report`)
imports ``plt`` and the helpers from here, so the backend is chosen once, before pyplot is first used.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from stabkit.store.atomic import atomic_write_text  # noqa: E402

STYLE = dict(style="whitegrid", context="paper", font_scale=1.1)  # seaborn theme of every figure


SIDECAR = ".figure.json"  # beside name.png: name.figure.json


def save(fig, out: Path, name: str) -> list:
    """Write ``fig`` as ``out/name.png`` and ``out/name.pdf`` (150 dpi, tight) and its sidecar
    ``out/name.figure.json`` (:func:`describe`), close it; returns the paths of the PNG and the PDF."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = out / f"{name}.{ext}"
        fig.savefig(p, dpi=150, bbox_inches="tight")
        paths.append(p)
    atomic_write_text(out / f"{name}{SIDECAR}", sidecar_text(describe(fig)))
    plt.close(fig)
    return paths


def _num(v):
    v = float(v)
    return None if not math.isfinite(v) else float(f"{v:.4g}")


def _values(data) -> list:
    return [_num(v) for v in np.asarray(data, dtype=float).ravel()]


def _label(artist) -> str:
    label = artist.get_label()
    return "" if label.startswith("_") else label  # matplotlib's automatic names (_child3) say nothing


def describe(fig) -> dict:
    """What a reader takes from ``fig``, as data: per visible axes its title, axis labels and scales, legend
    entries, texts, table cells and every line's label with its x and y values (4 significant digits,
    non-finite as null); the figure's own legends and texts."""
    axes = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        legend = ax.get_legend()
        cells = {}
        for table in ax.tables:
            for (r, c), cell in sorted(table.get_celld().items()):
                cells.setdefault(r, []).append(cell.get_text().get_text())
        axes.append({"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                     "xscale": ax.get_xscale(), "yscale": ax.get_yscale(),
                     "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
                     "texts": [t.get_text() for t in ax.texts],
                     "table": [cells[r] for r in sorted(cells)],
                     "lines": [{"label": _label(ln), "x": _values(ln.get_xdata()), "y": _values(ln.get_ydata())}
                               for ln in ax.get_lines()]})
    return {"axes": axes, "legends": [[t.get_text() for t in lg.get_texts()] for lg in fig.legends],
            "texts": [t.get_text() for t in fig.texts]}


def sidecar_text(description: dict) -> str:
    """The sidecar as JSON a diff reads: one key per line, each list of numbers on one line."""
    text = json.dumps(description, indent=1, ensure_ascii=False)
    return re.sub(r"\[[-0-9.e+,\snul]*\]", lambda m: re.sub(r"\s+", " ", m.group(0)), text) + "\n"


def same_figure(expected, actual, rtol: float = 2e-3, path: str = "figure") -> list:
    """Where two descriptions differ: texts exactly, numbers to ``rtol`` (4 printed digits, a last-digit
    rounding apart); an empty list when they agree. Each entry names the place (``axes[1].legend[2]``)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        if expected.keys() != actual.keys():
            return [f"{path}: keys {sorted(expected)} != {sorted(actual)}"]
        return [d for k in expected for d in same_figure(expected[k], actual[k], rtol, f"{path}.{k}")]
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return [f"{path}: {len(expected)} entries != {len(actual)}: {str(expected)[:200]} != {str(actual)[:200]}"]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in same_figure(e, a, rtol, f"{path}[{i}]")]
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return [] if math.isclose(expected, actual, rel_tol=rtol, abs_tol=1e-12) else [f"{path}: {expected} != {actual}"]
    return [] if expected == actual else [f"{path}: {expected!r} != {actual!r}"]


def colors(n):
    """Distinct colours: the colour-blind palette up to 10 curves, evenly spaced hues beyond."""
    return sns.color_palette("colorblind" if n <= 10 else "husl", max(n, 1))


# 13 markers: the series i and i + 10, drawn in shades of one hue, never share a marker
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "p", "h", "d")
# the colour-blind palette's hues as they are, darkened, lightened: 30 distinct colours
SHADES = (lambda c: c, lambda c: tuple(0.55 * x for x in c), lambda c: tuple(x + 0.4 * (1 - x) for x in c))


def line_styles(n, markevery=None) -> list:
    """``n`` series styles, each with its own colour AND its own marker (and line style): the 10 colour-blind
    colours, then darker and lighter shades of them, dashed and dash-dotted (more than ten evenly spaced hues are
    too close to tell apart); beyond 30 series, evenly spaced hues. ``markevery`` thins the markers of long
    curves (matplotlib's meaning)."""
    palette = sns.color_palette("colorblind", 10)
    hues = sns.color_palette("husl", n) if n > 10 * len(SHADES) else None
    return [dict(color=tuple(hues[i]) if hues else SHADES[i // 10 % 3](tuple(palette[i % 10])),
                 ls=["-", "--", "-."][i // 10 % 3], marker=MARKERS[i % len(MARKERS)],
                 **({} if markevery is None else {"markevery": markevery})) for i in range(n)]


def coincident(values: list, rtol: float = 1e-6) -> list:
    """For each curve the index of the first earlier curve it equals at every round (None if none), so a
    figure can draw a repeated curve as open markers labelled ``= <that one>`` instead of hiding it."""
    out = []
    for i, v in enumerate(values):
        out.append(next((j for j in range(i) if out[j] is None and v.shape == values[j].shape
                         and np.allclose(v, values[j], rtol=rtol, atol=0, equal_nan=True)), None))
    return out


__all__ = ["STYLE", "coincident", "colors", "describe", "line_styles", "plt", "same_figure", "save", "sns"]
