"""Figures a reviewer reads: bound curves with readable names and distinct styles, equal curves marked,
Libra panels whose labels and legends do not overlap anything."""
import re

import numpy as np
import pytest

from stabkit import RunConfig, TaskOptions
from stabkit.analysis import plots
from stabkit.analysis.bounds import Bound
from stabkit.analysis.run_analysis import analyze
from stabkit.run.experiment import run_pair


@pytest.fixture(scope="module")
def analyses(tmp_path_factory):
    root = tmp_path_factory.mktemp("fig")
    out = []
    for algo in ("fedsagd", "fedavg"):
        cfg = RunConfig(algo=algo, task="quadratic", rounds=8, pairs=2, local_steps=4,
                        task_options=TaskOptions(clients=4, heldout_clients=2, quad_dim=4))
        run_pair(cfg, out=root / algo)
        out.append(analyze(root / algo, bootstrap=0))
    return out


@pytest.fixture()
def captured(monkeypatch):
    figs = {}

    def keep(fig, out, name):
        fig.canvas.draw()
        figs[name] = fig
        return []

    monkeypatch.setattr(plots, "save", keep)
    return figs


def test_bound_titles_name_paper_section_and_form():
    b = Bound("fedsagd:fedavg.corrected.theta_t", "fedavg", "disc", "corrected", "FedSAGD Table 1", np.zeros(2))
    assert b.title == "FedSAGD Table 1, corrected, per-round Θ_t"
    b = Bound("hardt.sgd", "fedavg", "gen_gap", "convex", "Hardt, Recht & Singer 2016 Thm 3.8", np.zeros(2))
    assert b.title == "Hardt, Recht & Singer 2016 Thm 3.8, convex"
    assert Bound("libra.thm2", "fosm", "disc_sq", "paper", "Libra Thm 2 eq. (15)/(16)",
                 np.zeros(2)).title == "Libra Thm 2 eq. (15)/(16), paper"


def test_coincident_finds_equal_curves():
    a, b = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.5, 2.0])
    assert plots.coincident([a, b, a.copy(), b * (1 + 1e-9)]) == [None, None, 0, 1]


def test_bounds_panel_styles_names_and_marks_equal_curves(analyses, captured):
    plots.plot_discrepancy(analyses, None)
    panel = captured["discrepancy"].axes[1]
    lines = [ln for ln in panel.get_lines() if "(measured)" not in ln.get_label()]
    labels = [ln.get_label() for ln in lines]
    assert lines and not any(re.search(r"\w:\w|\[", lb) for lb in labels)  # no internal names like fedsagd:fedavg.paper
    assert any(lb.startswith("fedsagd: FedSAGD Table 1, theorem") for lb in labels)
    for run in ("fedsagd", "fedavg"):
        own = [ln for ln in lines if ln.get_label().startswith(f"{run}: ")]
        drawn = [ln for ln in own if ln.get_linestyle() != "None"]
        # get_linestyle() says "--" for every custom dash pattern: compare the pattern itself
        assert len({(str(ln._unscaled_dash_pattern), ln.get_marker()) for ln in drawn}) == len(drawn)
        for i, ln in enumerate(own):  # a curve equal to an earlier one says so in its label
            equal = [o for o in own[:i] if np.allclose(o.get_ydata(), ln.get_ydata(), rtol=1e-6, atol=0)]
            assert bool(equal) == (" = " in ln.get_label()), ln.get_label()


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_libra_labels_and_legends_do_not_overlap(analyses, captured):
    plots.plot_libra(analyses, None)
    fig = captured["libra"]
    r = fig.canvas.get_renderer()
    main = [ax for ax in fig.axes if ax.get_legend() is not None]
    twins = [ax for ax in fig.axes if ax not in main]
    assert len(main) == 2 and len(twins) == 2
    for ax in main:
        legend = ax.get_legend().get_window_extent(r)
        assert not any(_overlap(legend, other.get_window_extent(r)) for other in main)
    right_label = twins[0].yaxis.label.get_window_extent(r)
    assert not _overlap(right_label, main[1].yaxis.label.get_window_extent(r))
    assert not _overlap(right_label, main[1].get_yaxis().get_tightbbox(r))


def test_missing_fit_is_written_on_the_figure(analyses, captured):
    short = analyses[0]
    short.missing["growth fit"] = "not made: test"
    try:
        plots.plot_discrepancy([short], None)
    finally:
        short.missing.pop("growth fit")
    texts = [t.get_text() for t in captured["discrepancy"].texts]
    assert any("fedsagd: growth fit not made: test" in t for t in texts)
