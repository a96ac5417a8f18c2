"""Figures of ``stabkit landscape --plot``: contour and surface views, PNG and PDF, sized for a paper column.

One panel per run, the runs side by side with shared colour levels (so flatness compares across
algorithms): ``random_contour`` / ``random_surface`` (train loss filled or as the surface, test loss as
dashed contours or a grey wireframe), ``random_slice`` (f(a, 0)), ``plane_contour`` / ``plane_surface``
(client models as blue dots, the server model red, the other trajectory's model black), ``paired_slice``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from stabkit.plotting import STYLE, colors, plt, save, sns

PANEL = (3.2, 2.9)  # inches per panel
LEVELS = 14


def plot_landscapes(results: list, out: Path) -> list:
    """``results``: [(label, landscape result)]; returns the PNG paths."""
    sns.set_theme(**STYLE)
    plt.rcParams.update({"font.size": 8, "axes.titlesize": 9, "axes.labelsize": 8, "legend.fontsize": 7})
    paths = _contours(results, "random", out, "random_contour", "a (direction 1)", "b (direction 2)")
    paths += _surfaces(results, "random", out, "random_surface")
    paths += _random_slice(results, out)
    planar = [(lab, r) for lab, r in results if "plane" in r]
    if planar:
        paths += _contours(planar, "plane", out, "plane_contour", "principal direction 1", "principal direction 2")
        paths += _surfaces(planar, "plane", out, "plane_surface")
    paths += _paired(results, out)
    return [p for p in paths if p.suffix == ".png"]


def _levels(results, key):
    train = [r[key]["surface"]["train"] for _, r in results]
    lo = min(float(t.min()) for t in train)
    hi = max(float(np.quantile(t, 0.9)) for t in train)
    return np.linspace(lo, max(hi, lo + 1e-9), LEVELS)


def _panels(n, projection=None):
    fig = plt.figure(figsize=(PANEL[0] * n, PANEL[1]))
    axes = [fig.add_subplot(1, n, i + 1, projection=projection) for i in range(n)]
    fig.subplots_adjust(wspace=0.35)
    return fig, axes


def _contours(results, key, out, name, xlabel, ylabel):
    levels = _levels(results, key)
    fig, axes = _panels(len(results))
    for ax, (label, r) in zip(axes, results):
        s = r[key]
        filled = ax.contourf(s["a"], s["b"], s["surface"]["train"], levels=levels, cmap="viridis", extend="max")
        test_levels = np.linspace(s["surface"]["test"].min(), np.quantile(s["surface"]["test"], 0.9), 6)
        lines = ax.contour(s["a"], s["b"], s["surface"]["test"], levels=test_levels, colors="white",
                           linestyles="--", linewidths=0.8)
        ax.clabel(lines, fmt="%.2f", fontsize=6)
        if key == "plane":
            _dots(ax, s["dots"])
        else:
            ax.plot(0, 0, marker="*", color="red", ms=9, ls="none", label="model")
        ax.set(xlabel=xlabel, ylabel=ylabel if ax is axes[0] else "", title=f"{label} (round {r['round']})")
        ax.set_aspect("equal" if key == "plane" else "auto")
    axes[0].legend(loc="lower left", framealpha=0.8)
    cbar = fig.colorbar(filled, ax=axes, shrink=0.85, pad=0.02)
    cbar.set_label("train loss (filled); test loss: dashed")
    return save(fig, out, name)


def _dots(ax, dots):
    c = np.asarray(dots["clients"])
    # the server, the client mean and the other trajectory often (nearly) coincide: a large hollow ring, a
    # cross and a small triangle drawn in that order stay visible on top of each other
    ax.scatter(c[:, 0], c[:, 1], s=22, color="tab:blue", edgecolor="white", lw=0.6, label="client models", zorder=3)
    ax.scatter(0, 0, s=110, facecolor="none", edgecolor="red", lw=1.6, label="server model", zorder=4)
    ax.scatter(*dots["client_mean"], s=55, marker="x", color="orange", lw=1.6, label="client mean", zorder=5)
    if "other trajectory" in dots:
        ax.scatter(*dots["other trajectory"], s=18, marker="^", color="black", label="other trajectory", zorder=6)


def _surfaces(results, key, out, name):
    levels = _levels(results, key)
    fig, axes = _panels(len(results), projection="3d")
    for ax, (label, r) in zip(axes, results):
        s = r[key]
        A, B = np.meshgrid(s["a"], s["b"])
        # values above the top level are left out (holes), not clipped to a flat plateau that looks like data
        train = np.where(s["surface"]["train"] <= levels[-1], s["surface"]["train"], np.nan)
        test = np.where(s["surface"]["test"] <= levels[-1], s["surface"]["test"], np.nan)
        ax.plot_surface(A, B, train, cmap="viridis", vmin=levels[0], vmax=levels[-1], alpha=0.85, lw=0)
        ax.plot_wireframe(A, B, test, color="0.35", lw=0.4, rstride=2, cstride=2)
        if key == "plane":
            c = np.asarray(s["dots"]["clients"])
            ax.scatter(c[:, 0], c[:, 1], s["loss_at_clients"], color="tab:blue", s=14, depthshade=False)
            ax.scatter(0, 0, s["loss_at_server"], color="red", s=30, depthshade=False)
        ax.set_zlim(levels[0], levels[-1])
        ax.set(xlabel="a" if key == "random" else "pc 1", ylabel="b" if key == "random" else "pc 2", zlabel="loss")
        cut = " (above the z range: not drawn)" if np.isnan(train).any() or np.isnan(test).any() else ""
        ax.set_title(f"{label}: train (surface), test (wire){cut}", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.view_init(elev=32, azim=-60)
    return save(fig, out, name)


def _random_slice(results, out):
    fig, ax = plt.subplots(figsize=PANEL)
    for (label, r), color in zip(results, colors(len(results))):
        s = r["random"]
        ax.plot(s["a"], s["slice"]["train"], color=color, lw=1.6, label=f"{label} train")
        ax.plot(s["a"], s["slice"]["test"], color=color, lw=1.2, ls="--", label=f"{label} test")
    ax.set(xlabel="a (filter-normalised direction 1)", ylabel="loss", title="1-D slice f(a, 0)")
    ax.legend(fontsize=6)
    return save(fig, out, "random_slice")


def _paired(results, out):
    fig, ax = plt.subplots(figsize=(PANEL[0] * 1.2, PANEL[1]))
    for (label, r), color in zip(results, colors(len(results))):
        p = r["paired"]
        ax.plot(p["s"], p["train"], color=color, lw=1.6, label=f"{label}: train, own (‖x−x′‖ = {p['distance']:.3g})")
        same = np.allclose(p["train_other"], p["train"], rtol=1e-4, atol=1e-9)  # would hide under the solid line
        ax.plot(p["s"], p["train_other"], color=color, lw=1.4, ls=":", zorder=3,
                label=f"{label}: train, neighbour's" + (" (coincides with own)" if same else ""))
        ax.plot(p["s"], p["test"], color=color, lw=1.2, ls="--", label=f"{label}: test")
    for x in (0, 1):
        ax.axvline(x, color="0.5", lw=0.8)
    ax.set(xlabel="s: x_T + s (x′_T − x_T)   (0: this trajectory, 1: its neighbour)", ylabel="loss",
           title="slice between the pair's two trajectories")
    ax.legend(fontsize=5.5, loc="upper left", bbox_to_anchor=(1.01, 1))
    return save(fig, out, "paired_slice")
