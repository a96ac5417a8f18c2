"""The atlas page: ``index.html`` (one self-contained file: tables sortable in the browser, figures inline
as PNG data, no network), ``cells.csv``, ``cells.md`` (the page's tables) and ``summary.md`` (one row per
algorithm, one D_T column per table: the README's table) beside it, rendered from the Jinja2 templates in
``stabkit/atlas/templates``. ``write_page`` serves the atlas and ``stabkit report --html`` alike."""
from __future__ import annotations

import base64
import os
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np
import pandas as pd
from markupsafe import Markup

from stabkit.atlas.figures import draw_curves, draw_frontier, draw_gap_scatter, draw_privacy
from stabkit.atlas.link import MIN_CELLS, corr_text, link_summary, pareto_front, stability_check
from stabkit.atlas.matched import level_text
from stabkit.store.atomic import atomic_write_csv, atomic_write_json, atomic_write_text
from stabkit.store.outdir import FIGURES

COLUMNS = [  # (key, label, help, left-aligned)
    ("rank", "rank", "by D_T among the cells that learn (1 = most stable)", False),
    ("name", "algorithm", "algorithm (and any other swept value)", True),
    ("status", "status", "ok, no learning (below the task's floor: not ranked), diverged at round t", True),
    ("D_T", "D_T ± 95% CI", "final discrepancy E||x_T - x'_T||, t-interval over seeds x pairs", False),
    ("D_T.rel_hw", "CI/mean", "95% half-width relative to the mean", False),
    ("law", "growth (BIC)", "growth law best by BIC fitted to the mean curve, with its rate", True),
    ("D_T/D_T/2", "D_T/D_T/2", "discrepancy at T over discrepancy at T/2 (2: linear growth, 1: levelled off)", False),
    ("gap", "test−train loss", "generalisation gap at T, ± 95% CI", False),
    ("client_gap", "R_u − R_e", "unparticipating-client gap at T, ± 95% CI", False),
    ("test_acc", "test acc", "test accuracy at T (test loss for regression)", False),
    ("bound/measured", "tightest valid bound ÷ D_T", "smallest bound/measured at T among bounds whose conditions hold", True),
    ("front", "Pareto", "on the stability-accuracy Pareto front of this table", False),
    ("runs", "runs", "run directories and the command that reproduces each", True),
]


def _num(x, digits=3) -> str:
    if x is None or not np.isfinite(x):
        return "—"
    return f"{x:.{digits}g}"


def _pm(row, key) -> str:
    m, hw = row.get(key, np.nan), row.get(f"{key}.hw", np.nan)
    return _num(m) if not np.isfinite(hw) else f"{_num(m)} ± {_num(hw, 2)}"


def _sort(x):
    return "" if x is None or isinstance(x, float) and not np.isfinite(x) else x


def _cells_of(row, front: bool, runs_html: Markup) -> dict:
    """Column key -> (text, sort value, html) of one table row (the :data:`COLUMNS`)."""
    law = f"{row['law']} {row['rate_name']} {_num(row['rate'])}" if isinstance(row.get("law"), str) else "—"
    acc = row.get("test_acc", np.nan)
    quality = _num(acc) if np.isfinite(acc) else f"loss {_num(row.get('test_loss', np.nan))}"
    bound = row.get("bound", "—") if isinstance(row.get("bound"), str) else "—"
    bound_text = bound if bound == "no valid bound" or bound == "—" else f"{_num(row['bound/measured'])} ({bound})"
    rel = row.get("D_T.rel_hw", np.nan)
    values = [
        (_num(row["rank"], 2), _sort(row["rank"]), None),
        (row["name"], row["name"], None),
        (row["status"], row["status"], None),
        (_pm(row, "D_T"), _sort(row.get("D_T")), None),
        (f"{100 * rel:.1f}%" if np.isfinite(rel) else "—", _sort(rel), None),
        (law, law, None),
        (_num(row.get("D_T/D_T/2", np.nan)), _sort(row.get("D_T/D_T/2", np.nan)), None),
        (_pm(row, "gap"), _sort(row.get("gap", np.nan)), None),
        (_pm(row, "client_gap"), _sort(row.get("client_gap", np.nan)), None),
        (quality, _sort(acc if np.isfinite(acc) else row.get("test_loss", np.nan)), None),
        (bound_text, _sort(row.get("bound/measured", np.nan)), None),
        ("yes" if front else "", 1 if front else 0, None),
        ("", ",".join(row["jobs"]), runs_html),
    ]
    return dict(zip([c[0] for c in COLUMNS], values))


def _extra_cell(row, key: str) -> tuple:
    """(text, sort value, html) of an extra column: the row's ``key`` text, sorted by ``key.sort``."""
    text = row.get(key)
    return ("—" if not isinstance(text, str) else text), _sort(row.get(f"{key}.sort", np.nan)), None


def _runs_html(row, root: Path, out: Path) -> Markup:
    """Links to the cell's run directories (one per seed, in the sweep ``root`` or a top-up beside it) and,
    folded, the command that reproduces each."""
    links, commands = [], []
    for job, path in zip(row["jobs"], row.get("job_dirs") or [root / "jobs" / j for j in row["jobs"]]):
        rel = os.path.relpath(path, out)
        seed = re.search(r"seed=(\d+)", job)
        links.append(Markup('<a href="{0}/">{1}</a>').format(rel, f"s{seed.group(1)}" if seed else "run"))
        commands.append(Markup("<code>stabkit pair --config {0}/config.json --out runs/{1}</code>").format(rel, job))
    return (Markup(" ").join(links) + Markup(" <details><summary>command</summary>")
            + Markup("<br>").join(commands) + Markup("</details>"))


def with_columns(extra: list) -> list:
    """:data:`COLUMNS` with ``extra`` columns (same tuple form) after the algorithm's name."""
    at = [c[0] for c in COLUMNS].index("name") + 1
    return COLUMNS[:at] + list(extra) + COLUMNS[at:]


def build_tables(cells: pd.DataFrame, root: Path, out: Path, titles: dict, columns: list = COLUMNS,
                 prefix: str = "") -> list:
    """Template data: one table per (task, perturbation), rows ranked first (by D_T), then the others;
    ``columns`` beyond :data:`COLUMNS` read the row's own text (:func:`_extra_cell`); ``prefix`` tells a
    second view's table ids apart."""
    front = pareto_front(cells)
    tables = []
    for (task, perturb), g in cells.groupby(["task", "perturb"], sort=False):
        g = g.assign(_r=g["rank"].fillna(np.inf)).sort_values(["_r", "D_T"])
        rows = []
        for i, row in g.iterrows():
            values = _cells_of(row, bool(front[i]), _runs_html(row, root, out))
            cells_ = [values[k] if k in values else _extra_cell(row, k) for k, *_ in columns]
            rows.append({"cls": ("off" if row["status"] != "ok" else "") + (" front" if front[i] else ""),
                         "cells": [{"text": t, "sort": s, "html": h, "cls": {"name": "l name", "status": "l status"}.get(
                                    k, "l" if left else "")}
                                   for (t, s, h), (k, _, _, left) in zip(cells_, columns)],
                         "md": [t for (t, _, _), (k, *_rest) in zip(cells_, columns) if k != "runs"]})
        level = g["level"].iloc[0] if "level" in g and np.isfinite(g["level"].iloc[0]) else None
        regression = "test_acc" not in g or g["test_acc"].isna().all()
        matched = f" (matched level: {level_text(level, regression)})" if level is not None else ""
        tables.append({"id": prefix + re.sub(r"[^A-Za-z0-9]+", "-", f"{task}-{perturb}"),
                       "title": f"{titles.get(task, task)} — {perturb} perturbation{matched}", "rows": rows})
    return tables


def wide_markdown(cells: pd.DataFrame, titles: dict) -> str:
    """One row per setting, one column per table: D_T ± 95% half-width (@ the tuned value in a tuned view)
    (rank), "no learning"/"diverged" where the cell is not ranked; then each task's test accuracy (or loss) under client perturbation."""
    tables = list(dict.fromkeys(zip(cells["task"], cells["perturb"])))
    tasks = list(dict.fromkeys(cells["task"]))
    head = [f"{t}, {p}" for t, p in tables]
    quality = [f"{t}: test acc" for t in tasks]
    lines = ["| algorithm | " + " | ".join(head + quality) + " |", "|---" * (1 + len(head) + len(quality)) + "|"]
    for name in dict.fromkeys(cells["name"]):
        row = [name]
        for t, p in tables:
            c = cells[(cells["name"] == name) & (cells["task"] == t) & (cells["perturb"] == p)]
            if not len(c):
                row.append("")
                continue
            c = c.iloc[0]
            text = _pm(c, "D_T") + (f" @{c['tuned']}" if isinstance(c.get("tuned"), str) else "")
            row.append(f"{text} ({int(c['rank'])})" if c["status"] == "ok" else f"{text} *{c['status'].split(' (')[0]}*")
        for t in tasks:
            c = cells[(cells["name"] == name) & (cells["task"] == t)]
            c = c[c["perturb"] == c["perturb"].iloc[0]].iloc[0] if len(c) else None
            acc = np.nan if c is None else c.get("test_acc", np.nan)
            row.append("" if c is None else _num(acc) if np.isfinite(acc) else f"(loss {_num(c['test_loss'])})")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def machine_info(extra: dict | None = None) -> list:
    import torch

    import stabkit

    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = {"stabkit": stabkit.__version__, "torch": torch.__version__, "numpy": np.__version__,
            "pandas": pd.__version__, "python": sys.version.split()[0], "platform": platform.platform(),
            "CPU": f"{cpu}, {os.cpu_count()} cores", "CPU kernels": _kernels(), "load average (at page build)": " ".join(
                f"{x:.2f}" for x in os.getloadavg())}
    return list({**info, **(extra or {})}.items())


def _kernels() -> str:
    """The instruction-set level and kernel libraries the cells ran on (the last digits depend on them)."""
    from stabkit.engine.kernels import kernel_facts

    k = kernel_facts()
    return f"{k['cpu_capability']}, oneDNN {k['onednn']}, MKL {k['mkl']}"


def summary_lines(cells: pd.DataFrame, link: dict) -> list:
    """The page's summary: achieved CI half-widths, frontier per table, correlation, theorem check."""
    ok = cells[cells["status"] == "ok"]
    lines = []
    rel = ok["D_T.rel_hw"].dropna()  # a cell of a single replicate has no interval
    if len(rel):
        lines.append(f"95% CI half-width of D_T: median {100 * rel.median():.1f}% of the mean, worst "
                     f"{100 * rel.max():.1f}% ({ok.loc[rel.idxmax(), 'name']}, {ok.loc[rel.idxmax(), 'task']}, "
                     f"{ok.loc[rel.idxmax(), 'perturb']}); {int((rel <= 0.1).sum())} of {len(ok)} ranked cells "
                     f"within ±10%.")
    front = pareto_front(cells)
    for (task, perturb), g in cells.groupby(["task", "perturb"], sort=False):
        names = ", ".join(g[front[g.index]].sort_values("D_T")["name"])
        off = g[g["status"] != "ok"]
        lines.append(f"Pareto front, {task} / {perturb}: {names or 'none'}"
                     + (f" (not ranked: {', '.join(f'{n} [{s}]' for n, s in zip(off['name'], off['status']))})"
                        if len(off) else ""))
    c, cg = link["all"], link["client_gap"]
    p = f", p = {c['p']:.2g}" if c["n"] >= MIN_CELLS else ""
    lines.append(f"Spearman rank correlation of D_T with the gap (test − train loss), ranked cells, bootstrap 95% "
                 f"interval: {corr_text(c)}{p}; with R_u − R_e: {corr_text(cg)}.")
    within = [f"{key} {corr_text(v)}" for key, v in link.items() if "/" in key]
    if within:
        lines.append("Within each table (no differences of scale between tasks): " + "; ".join(within) + ".")
    th = link["theorem"]
    if th["m"]:
        lines.append(f"Stability theorem |gen gap| ≤ Ĝ · E‖x_T − x′_T‖ (Ĝ = the estimated per-sample gradient bound): "
                     f"holds in {th['n']} of {th['m']} cells (smallest Ĝ·D_T / |gap|: {th['min_ratio']:.3g}).")
    else:
        lines.append("Stability theorem check: no cell has an estimated Ĝ (constants not estimated).")
    return lines


def _figure(path: Path, title: str, caption: str) -> dict:
    return {"title": title, "caption": caption, "data": base64.b64encode(path.read_bytes()).decode()}


@dataclass
class PageExtras:
    """What a page adds to its one view of the cells: machine lines, the main view's extra columns (after the
    name, :func:`with_columns`) and its heading and note, further views (``sections``: dicts with
    ``heading``, ``note``, ``cells``, ``prefix``), and figures drawn by the caller (``(path, title,
    caption)``, shown first)."""

    machine: dict = field(default_factory=dict)
    columns: list = field(default_factory=list)
    heading: str = ""
    note: str = ""
    sections: list = field(default_factory=list)
    figures: list = field(default_factory=list)


def _sections(cells: pd.DataFrame, root: Path, out: Path, titles: dict, extras: PageExtras) -> list:
    """Template data per view: heading, note, its columns (html and markdown) and its tables."""
    views = [{"heading": extras.heading, "note": extras.note, "cells": cells, "prefix": "",
              "columns": with_columns(extras.columns)}]
    views += [{**v, "columns": COLUMNS} for v in extras.sections]
    out_ = []
    for v in views:
        cols = v["columns"]
        out_.append({"heading": v["heading"], "note": v["note"],
                     "columns": [{"label": label, "help": help_, "cls": "l" if left else ""}
                                 for _, label, help_, left in cols],
                     "md_columns": [{"label": label} for k, label, _, _ in cols if k != "runs"],
                     "tables": build_tables(v["cells"], root, out, titles, cols, v["prefix"])})
    return out_


def write_page(cells: pd.DataFrame, root, out, title: str, description: str = "", command: str = "",
               policy: str = "", titles: dict | None = None, extras: PageExtras | None = None) -> dict:
    """Write ``index.html``, ``cells.csv``, ``cells.md``, ``link.json`` and ``figures/`` into ``out``;
    ``cells`` is the page's main view (summary, figures, ``cells.csv``), ``extras`` what it adds."""
    root, out, titles, extras = Path(root), Path(out), titles or {}, extras or PageExtras()
    out.mkdir(parents=True, exist_ok=True)
    link = link_summary(cells)
    cells = cells.assign(front=pareto_front(cells), theorem_holds=stability_check(cells)["holds"])
    figs = out / FIGURES
    paths = {"curves": draw_curves(cells, figs, titles), "frontier": draw_frontier(cells, figs, titles),
             "gap": draw_gap_scatter(cells, figs, titles, link["all"])}
    has_dp = "epsilon" in cells and bool(np.isfinite(cells["epsilon"].astype(float)).any())
    if has_dp:
        paths["privacy"] = draw_privacy(cells, figs, titles)
    sections = _sections(cells, root, out, titles, extras)
    env = jinja2.Environment(loader=jinja2.PackageLoader("stabkit.atlas", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=False)
    figures = [_figure(*f) for f in extras.figures] + [
        _figure(paths["curves"], "Discrepancy curves", "Mean ‖x_t − x′_t‖ over seeds × pairs, one panel per task and "
                "perturbation; faded lines: cells that do not learn or diverged."),
        _figure(paths["frontier"], "Stability–accuracy frontier", "D_T (± 95% CI) against test accuracy (test loss "
                "for regression); the red line joins the Pareto front (no other cell is both more stable and more "
                "accurate)."),
        _figure(paths["gap"], "Generalisation gap against discrepancy", "Every ranked cell; colour = task, marker = "
                "perturbation."),
    ] + ([_figure(paths["privacy"], "Stability against privacy", "DP-FedAvg at each noise multiplier z: D_T (± 95% "
                  "CI, coupled noise) against ε at δ = 1e-5, the accountant's (filled) and the one the run spent by "
                  "its measured sensitivities (open); dashed: FedAvg without clipping or noise.")] if has_dp else [])
    html = env.get_template("index.html.j2").render(
        title=title, description=description, command=command, policy=policy, summary=summary_lines(cells, link),
        sections=sections, figures=figures, machine=machine_info(extras.machine))
    atomic_write_text(out / "index.html", html)
    md_env = jinja2.Environment(loader=jinja2.PackageLoader("stabkit.atlas", "templates"), autoescape=False)
    md = md_env.get_template("cells.md.j2").render(sections=sections)
    atomic_write_text(out / "cells.md", re.sub(r"\n{3,}", "\n\n", md).strip() + "\n")
    atomic_write_text(out / "summary.md", wide_markdown(cells, titles))
    csv = cells.drop(columns=["curve", "job_dirs"], errors="ignore").assign(jobs=cells["jobs"].map(";".join))
    atomic_write_csv(out / "cells.csv", csv)
    atomic_write_json(out / "link.json", link)
    return {"page": out / "index.html", "cells": out / "cells.csv", "markdown": out / "cells.md",
            "summary": out / "summary.md",
            "figures": list(paths.values()), "link": link, "cells_df": cells}
