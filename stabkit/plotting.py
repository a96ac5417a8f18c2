"""The one plotting module: matplotlib's Agg backend (figures are files, no display), the house style, distinct
colours and line styles, and saving a figure as PNG and PDF.

Every figure of stabkit (``stabkit bounds --plot``: :mod:`stabkit.analysis.plots`; ``stabkit landscape --plot``:
:mod:`stabkit.flatness.plots`; ``stabkit report``: :mod:`stabkit.sweep.report`, :mod:`stabkit.flatness.report`)
imports ``plt`` and the helpers from here, so the backend is chosen once, before pyplot is first used.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

STYLE = dict(style="whitegrid", context="paper", font_scale=1.1)  # seaborn theme of every figure


def save(fig, out: Path, name: str) -> list:
    """Write ``fig`` as ``out/name.png`` and ``out/name.pdf`` (150 dpi, tight), close it; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = out / f"{name}.{ext}"
        fig.savefig(p, dpi=150, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def colors(n):
    """Distinct colours: the colour-blind palette up to 10 curves, evenly spaced hues beyond."""
    return sns.color_palette("colorblind" if n <= 10 else "husl", max(n, 1))


def line_styles(n) -> list:
    """``n`` distinct (colour, line style) pairs: the 10 colour-blind colours, then again dashed, dash-dotted, ...
    (more than ten evenly spaced hues are too close to tell apart)."""
    palette = sns.color_palette("colorblind", 10)
    return [dict(color=palette[i % 10], ls=["-", "--", "-.", ":"][i // 10 % 4]) for i in range(n)]


def coincident(values: list, rtol: float = 1e-6) -> list:
    """For each curve the index of the first earlier curve it equals at every round (None if none), so a
    figure can draw a repeated curve as open markers labelled ``= <that one>`` instead of hiding it."""
    out = []
    for i, v in enumerate(values):
        out.append(next((j for j in range(i) if out[j] is None and v.shape == values[j].shape
                         and np.allclose(v, values[j], rtol=rtol, atol=0, equal_nan=True)), None))
    return out


__all__ = ["STYLE", "coincident", "colors", "line_styles", "plt", "save", "sns"]
