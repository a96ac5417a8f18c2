"""``run_atlas``: a suite over a set of algorithms as one resumable sweep, then its page.

Everything that can be wrong with the request is checked before anything runs or is written: the suite
name, every algorithm (a plug-in is imported: one that fails is one line), every job's config, the data
of every task, and ``out`` (an existing directory must be empty or hold an atlas). The sweep lives in
``out/sweep`` (``stabkit sweep``'s layout: re-running the same command skips finished jobs); the page,
tables and figures are written to ``out``. The page's libraries (pandas, scipy, matplotlib) and torch are
imported where the sweep or the page needs them, after the request's own checks: a refused request answers
before them.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from stabkit.atlas.aliases import fold_aliases
from stabkit.atlas.extend import EXTEND, LIMIT, ROUNDS, extend_dir, extension_rows, pending_points
from stabkit.atlas.floors import DEFAULT_FLOOR
from stabkit.atlas.suites import Suite, get_suite, scaled, suite_spec_dict
from stabkit.atlas.topup import PASSES, check_target, extra_units, seconds_per_pair, topup_dir, topup_spec
from stabkit.atlas.tuning import (
    Tune,
    at_chosen,
    bind,
    grid_spec,
    parse_tune,
    point_text,
    rows_spec,
    spec_rows,
    tuned_spec,
)
from stabkit.errors import ConfigError, require
from stabkit.store.atomic import atomic_write_json
from stabkit.store.outdir import check_writable

ATLAS_FILE = "atlas.json"
SWEEP = "sweep"
TENSORBOARD_FOLDERS = (SWEEP, *(extend_dir(k) for k in range(1, ROUNDS + 1)),  # --tensorboard DIR/<these>/<job>
                       *(topup_dir(k) for k in range(1, PASSES + 1)))
# An atlas of all algorithms measures DP-FedAvg at three noise multipliers (its default z = 1 in the middle), so
# its page can plot D_T against epsilon; --algos takes any variant (stabkit.algorithms.variant) for others
DP_LEVELS = ("dp_fedavg[noise_multiplier=0.5]", "dp_fedavg", "dp_fedavg[noise_multiplier=2]")


def resolve_algos(text: Optional[str]) -> list:
    """The algorithms named (comma-separated built-in names, variants, entry points or import paths), each
    resolved; default: every built-in algorithm (DP-FedAvg at the ``DP_LEVELS``) and every installed plug-in."""
    from stabkit.algorithms import algorithm_class, available_algorithms
    from stabkit.algorithms.variant import split_names

    if text is None:
        names = list(available_algorithms())
        at = names.index("dp_fedavg")
        return names[:at] + list(DP_LEVELS) + names[at + 1:]
    names = split_names(text)
    require(bool(names), "algos", text, "a comma-separated list of algorithm names or import paths")
    require(len(set(names)) == len(names), "algos", text, "each algorithm once")
    for name in names:
        algorithm_class(name)
    return names


def check_out(out: Path, suite: Suite) -> None:
    """``out`` must not exist, be empty, or hold an atlas of the same suite (then it is resumed)."""
    if not out.exists():
        return
    require(out.is_dir(), "out", str(out), "a directory (it is a file)")
    meta = out / ATLAS_FILE
    if meta.is_file():
        try:
            held = json.loads(meta.read_text())
        except (ValueError, UnicodeDecodeError) as e:
            held = f"not valid JSON ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        if not isinstance(held, dict) or not isinstance(held.get("suite"), str):
            what = held if isinstance(held, str) else "no suite recorded in it"
            raise ConfigError(f"invalid out={str(out)!r}: its {ATLAS_FILE} is damaged ({what}: {meta}); restore "
                              "it, or give a new directory")
        require(held["suite"] == suite.name, "out", str(out), f"a new directory: it holds the atlas of suite "
                f"{held['suite']!r}, not {suite.name!r}")
        return
    if any(out.iterdir()):
        raise ConfigError(f"invalid out={str(out)!r}: it holds something else (no {ATLAS_FILE}); give a new or "
                          f"empty directory")


def _check_same_sweep(out: Path, spec) -> None:
    """An existing atlas is resumed only with the same jobs (the same algorithms and suite)."""
    path = out / SWEEP / "manifest.json"
    try:
        held = json.loads(path.read_text()).get("spec_hash") if path.is_file() else spec.hash
    except ValueError:  # a damaged manifest: the sweep rebuilds it from the job directories
        return
    require(held == spec.hash, "out", str(out), "a new directory: it holds an atlas of other algorithms or "
            "settings (re-run with the same --suite and --algos to resume it)")


@dataclass(frozen=True)
class AtlasRequest:
    """What an atlas run is asked for: the suite and algorithms (comma-separated names or import paths; None:
    all), the workers the executor has, the papers' data folder, the suite at another scale (``seeds``/``pairs``,
    :func:`stabkit.atlas.suites.scaled`), the command recorded on the page, and whether to only check and
    project (``dry_run``) or to skip the projection (``project=False``)."""

    suite: str = "small"
    algos: Optional[str] = None
    workers: int = 1
    data_dir: Optional[str] = None
    seeds: Optional[int] = None
    pairs: Optional[int] = None
    perturbs: Optional[str] = None  # the perturbation columns (comma-separated; None: the suite's)
    command: str = ""
    dry_run: bool = False
    project: bool = True
    ci_target: Optional[float] = None  # top up cells whose D_T half-width exceeds this share (None: the suite's)
    max_units: int = 1024  # replicate units (seeds x pairs) a top-up may give a cell at most
    top_up: bool = True  # False: no top-up, whatever the suite's target
    tune: Optional[str] = None  # "lr=0.01,0.1", "lr" (the suite's default grid), ...: stabkit.atlas.tuning
    gpus: Optional[int] = None  # also project the first sweep onto this many GPUs (stabkit.atlas.gpuplan)

    def target(self, suite: Suite) -> Optional[float]:
        """The relative half-width the cells are topped up to, or None (no top-up)."""
        return (self.ci_target if self.ci_target is not None else suite.ci_target) if self.top_up else None


@dataclass(frozen=True)
class AtlasPlan:
    """A checked request: the suite, the algorithms, the tuning grid (or None), the suite's own sweep spec
    (``spec_dict``), the spec that runs first (the grid pass when tuned), its jobs, the top-up target and
    the metadata written to ``atlas.json``."""

    suite: Suite
    names: list
    tune: Optional[Tune]
    spec_dict: dict
    spec: object
    jobs: list
    target: Optional[float]
    meta: dict


def plan_atlas(req: AtlasRequest, out: Path, executor, echo: Callable = print) -> AtlasPlan:
    """Check everything about ``req`` before anything runs or is written (one line for the first problem)."""
    from stabkit.sweep import parse_spec

    suite = scaled(get_suite(req.suite), req.seeds, req.pairs, req.perturbs)
    check_target(req.ci_target, req.max_units)
    tune = parse_tune(req.tune, suite.name)
    names, folded = fold_aliases(resolve_algos(req.algos))
    if tune is not None:
        tune = bind(tune, names)
    check_writable(out)  # a read-only, unwritable or too long --out, refused before anything is computed
    check_out(out, suite)
    if suite.needs_data:
        require(req.data_dir is not None, "data_dir", req.data_dir, f"the folder with the data files of suite "
                f"{suite.name!r} (--data-dir DIR; see docs/tasks.md)")
    spec_dict = suite_spec_dict(suite, names, req.data_dir)
    run_dict = grid_spec(spec_dict, tune, suite.seeds[:1]) if tune else spec_dict
    spec = parse_spec(run_dict, source=f"suite {suite.name}")
    jobs = spec.jobs()
    _check_same_sweep(out, spec)
    executor.check(jobs)
    for dropped, kept in folded:
        echo(f"{dropped} is {kept} at the defaults (the same update, bit for bit): measured once, as {kept}")
    meta = {"suite": suite.name, "algos": names, "description": suite.description, "command": req.command,
            "seeds": req.seeds, "pairs": req.pairs, "perturbs": req.perturbs, "ci_target": req.target(suite),
            "max_units": req.max_units,
            "tune": tune.to_dict() if tune else None}
    return AtlasPlan(suite, names, tune, spec_dict, spec, jobs, req.target(suite), meta)


def _project(req: AtlasRequest, plan: AtlasPlan, echo: Callable, gpus_per_job: Optional[float] = None) -> None:
    """Print the jobs and the projected time of the first sweep (and on ``req.gpus`` GPUs)."""
    from stabkit.atlas.estimate import projected_seconds
    from stabkit.atlas.gpuplan import projection_lines

    suite, names = plan.suite, plan.names
    est = projected_seconds(plan.jobs, req.workers)
    grid = (f" x {len(plan.tune.grid)} values of {plan.tune.key}" + "".join(
        f" (x {len(a.grid)} of {a.key} for {', '.join(a.algos)})" for a in plan.tune.extra) + " (first seed)"
        if plan.tune else "")
    seeds = 1 if plan.tune else len(suite.seeds)
    echo(f"atlas {suite.name}: {len(names)} algorithms x {len(suite.tasks)} tasks x {len(suite.perturbs)} "
         f"perturbations x {seeds} seeds{grid} = {len(plan.jobs)} jobs; projected {est['total_s'] / 60:.1f} min "
         f"on {req.workers} worker(s), which do {est['capacity']:.2g} jobs' worth at once here (from 2-round "
         f"calibrations per task and per algorithm; done jobs are skipped)")
    if req.gpus:
        for line in projection_lines(est, req.gpus, gpus_per_job):
            echo(line)
    if plan.tune:
        rows = len(spec_rows(plan.spec_dict))  # one job per (task, perturbation, algorithm) and value beyond an edge
        per_job = est["total_s"] / len(plan.jobs)
        echo(f"then extensions where a choice sits on a grid's edge (one value beyond it per round, at most {LIMIT} "
             f"per side and axis): each round at most {rows} jobs, {rows * per_job / 60:.1f} min; one edge side "
             f"extended to the limit everywhere: {LIMIT * rows} jobs, {LIMIT * rows * per_job / 60:.1f} min (projected "
             f"from the grid's mean job)")
    if plan.target is not None:
        at = " at the chosen values" if plan.tune else ""
        echo(f"then a top-up{at} to ±{plan.target:.0%} of D_T (its jobs and time are printed when the sweep has "
             f"ended)")


def run_atlas(req: AtlasRequest, out, executor, echo: Callable = print, progress: Optional[Callable] = None) -> dict:
    """Validate, print the projected time, run the sweep into ``out/sweep`` (the grid pass when tuned), top
    up and write the page to ``out``."""
    from stabkit.sweep import run_sweep

    out = Path(out)
    plan = plan_atlas(req, out, executor, echo)
    if req.project or req.dry_run:
        _project(req, plan, echo, executor.resources.gpus)
    if req.dry_run:
        return {"jobs": len(plan.jobs)}
    from stabkit.atlas.cells import read_jobs

    out.mkdir(parents=True, exist_ok=True)
    meta = dict(plan.meta)
    atomic_write_json(out / ATLAS_FILE, meta)
    start = time.perf_counter()
    manifests = [run_sweep(plan.spec, out / SWEEP, executor, progress=progress)]
    jobs = None  # every sweep's jobs, read once (and analysed once) for the top-up and the page
    if plan.target is not None or plan.tune is not None:
        jobs = read_jobs(out / SWEEP, req.workers)
        if plan.tune is not None:
            manifests, jobs = _extend(req, plan, out, jobs, manifests, executor, echo, progress)
        main, select = _chosen(plan, jobs, echo)
        if plan.target is not None:
            manifests, jobs = _top_up(req, plan.target, out, main, jobs, manifests, executor, echo, progress, select)
    meta["sweep_wall_s"] = round(time.perf_counter() - start, 1)
    meta["job_wall_s"] = round(sum(r.get("wall_s") or 0 for m in manifests for r in m.jobs.values()), 1)
    atomic_write_json(out / ATLAS_FILE, meta)
    counts = {k: sum(m.counts().get(k, 0) for m in manifests) for k in manifests[0].counts()}
    return {**atlas_page(out, jobs), "counts": counts}


def _chosen(plan: AtlasPlan, grid_jobs: list, echo: Callable) -> tuple:
    """``(spec the top-up extends, cells -> the cells it tops up)``: untuned, the suite's spec and every
    cell; tuned, the suite at the values the grid pass chose (printed) and the cells at those values."""
    if plan.tune is None:
        return plan.spec_dict, lambda cells: cells
    from stabkit.atlas.extend import choice_edges
    from stabkit.atlas.tuning import chosen_points, point_scores

    tune, scores = plan.tune, point_scores(grid_jobs, plan.tune)
    chosen, edges = chosen_points(scores, tune), choice_edges(scores, tune)
    for task in [t.name for t in plan.suite.tasks]:
        picks = {a: p for (t, a), p in chosen.items() if t == task}
        stopped = sum(any(e.stop in ("limit", "range end", "pending") for e in edges[(task, a)]) for a in picks)
        echo(f"tuned {'+'.join(tune.keys())} on {task} (best validation score at T): " + ", ".join(
            f"{a} {point_text(p, tune.key)}" for a, p in picks.items()) + (
            f" ({stopped} of {len(picks)} still on an edge: the limit or the range's end)" if stopped else ""))
    main = tuned_spec(plan.spec_dict, tune, chosen, plan.suite.seeds[:1])
    return main, lambda cells: at_chosen(cells, chosen)


def _extend(req: AtlasRequest, plan: AtlasPlan, out: Path, jobs: list, manifests: list, executor, echo: Callable,
            progress) -> tuple:
    """The extension rounds (:mod:`stabkit.atlas.extend`): while a choice sits on a grid's edge (or a curve
    reaches its matched level at its smallest rate), one more resumable sweep of the values beyond;
    ``(manifests, jobs)`` with every round's appended."""
    from stabkit.atlas.cells import read_jobs
    from stabkit.sweep import parse_spec, run_sweep

    jobs = list(jobs)
    for k in range(1, ROUNDS + 1):
        pending = pending_points(jobs, atlas_cells(out, jobs, with_topup=False), plan.tune)
        if not pending:
            echo(f"extensions: every choice is interior or stopped ({k - 1} round(s))")
            break
        rows = extension_rows(plan.spec_dict, pending)
        spec = parse_spec(rows_spec(f"{plan.spec_dict['name']}-{extend_dir(k)}", plan.spec_dict, rows, plan.tune,
                                    plan.suite.seeds[:1]), source=f"atlas extension {k}")
        echo(f"extension {k}: {len(pending)} (task, algorithm) choices or curves at a grid's edge: {len(rows)} more "
             f"jobs (" + ", ".join(f"{t}/{a} {point_text(p, plan.tune.key)}" for t, a, p in pending[:6])
             + (", ..." if len(pending) > 6 else "") + ")")
        manifests = [*manifests, run_sweep(spec, out / extend_dir(k), executor, progress=progress)]
        jobs += read_jobs(out / extend_dir(k), req.workers)
    return manifests, jobs


def _top_up(req: AtlasRequest, target: float, out: Path, main: dict, main_jobs: list, manifests: list, executor,
            echo: Callable, progress, select: Callable) -> tuple:
    """The top-up passes (``stabkit.atlas.topup``) of the cells that ``select`` keeps still wider than
    the target: ``(manifests, jobs)``, the main sweep's with every pass's appended."""
    from stabkit.atlas.cells import read_jobs
    from stabkit.sweep import parse_spec, run_sweep

    jobs = list(main_jobs)
    for k in range(1, PASSES + 1):
        extra = extra_units(select(atlas_cells(out, jobs, with_topup=False)), target, req.max_units)
        spec_dict = topup_spec(main, extra, k, seconds_per_pair(manifests))
        if spec_dict is None:
            echo(f"top-up: every ranked cell is within ±{target:.0%} (or at {req.max_units} units)")
            break
        spec = parse_spec(spec_dict, source=f"atlas top-up {k}")
        text = ""
        if req.project:
            from stabkit.atlas.estimate import projected_seconds

            text = (f"; projected {projected_seconds(spec.jobs(), req.workers)['total_s'] / 60:.1f} min on "
                    f"{req.workers} worker(s)")
        echo(f"top-up {k} to ±{target:.0%}: {len(extra)} cells need more pairs (at most {req.max_units} units "
             f"each): {len(extra)} more jobs, {sum(extra.values())} pairs{text}")
        manifests = [*manifests, run_sweep(spec, out / topup_dir(k), executor, progress=progress)]
        jobs += read_jobs(out / topup_dir(k), req.workers)
    return manifests, jobs


def _all_jobs(out: Path, jobs: Optional[list], with_topup: bool) -> list:
    """The sweep's and extensions' jobs (``jobs`` if already read) and, with ``with_topup``, every top-up
    pass's."""
    from stabkit.atlas.cells import read_jobs

    jobs_read_here = jobs is None
    jobs = list(jobs) if jobs is not None else read_jobs(out / SWEEP)
    for k in range(1, ROUNDS + 1) if jobs_read_here else ():
        if (out / extend_dir(k) / "manifest.json").is_file():
            jobs += read_jobs(out / extend_dir(k))
    for k in range(1, PASSES + 1) if with_topup else ():
        if (out / topup_dir(k) / "manifest.json").is_file():
            jobs += read_jobs(out / topup_dir(k))
    return jobs


def atlas_cells(out: Path, jobs: Optional[list] = None, with_topup: bool = True):
    """The cell table of the atlas in ``out``: its sweep's jobs (``jobs`` if already read) and, with
    ``with_topup``, every top-up pass's."""
    from stabkit.atlas.cells import cell_table

    meta = json.loads((out / ATLAS_FILE).read_text())
    suite = scaled(get_suite(meta["suite"]), meta.get("seeds"), meta.get("pairs"), meta.get("perturbs"))
    floors = {t.name: t.floor for t in suite.tasks}
    return cell_table(_all_jobs(out, jobs, with_topup), learn_floor=lambda task: floors.get(task, DEFAULT_FLOOR))


def _machine(meta: dict, suite: Suite) -> dict:
    """The page's lines on the suite, the top-up, the tuning and the time."""
    extra = {"suite": suite.name}
    if meta.get("tune"):
        extra["tuned"] = f"{meta['tune']['key']} over {', '.join(f'{v:g}' for v in meta['tune']['grid'])}"
    if meta.get("ci_target") is not None:
        extra["top-up"] = (f"cells wider than ±{meta['ci_target']:.0%} of D_T given more pairs, at most "
                           f"{meta['max_units']} units (seeds x pairs) each")
    if meta.get("sweep_wall_s") is not None:
        extra["suite time (this invocation; wall)"] = f"{meta['sweep_wall_s']:.0f} s"
        extra["job time (sum over jobs, one thread each)"] = f"{meta['job_wall_s']:.0f} s"
    return extra


def atlas_page(out, jobs: Optional[list] = None) -> dict:
    """(Re)build the atlas page of ``out`` from its sweep directory (and its top-ups); ``jobs``: all of
    their jobs where the caller has read them already."""
    from stabkit.atlas.page import PageExtras, write_page
    from stabkit.atlas.suites import POLICY
    from stabkit.atlas.tunedpage import tuned_page

    out = Path(out)
    meta = json.loads((out / ATLAS_FILE).read_text())
    suite = scaled(get_suite(meta["suite"]), meta.get("seeds"), meta.get("pairs"), meta.get("perturbs"))
    jobs = _all_jobs(out, jobs, with_topup=jobs is None)
    cells = atlas_cells(out, jobs, with_topup=False)
    tasks, algos = [t.name for t in suite.tasks], meta["algos"]  # the suite's order, not the directory's
    cells = cells.sort_values(["task", "perturb", "algo"], key=lambda col: col.map(
        {"task": tasks, "perturb": list(suite.perturbs), "algo": algos}[col.name].index)).reset_index(drop=True)
    titles = {t.name: t.title for t in suite.tasks}
    extras, policy = PageExtras(machine=_machine(meta, suite)), POLICY
    if meta.get("tune"):
        grid_jobs = [j for j in jobs if j.path.parent.parent == out / SWEEP
                     or j.path.parent.parent.name.startswith(EXTEND)]
        cells, extras, policy = tuned_page(cells, meta, suite, grid_jobs, out, titles, extras)
    return write_page(cells, out / SWEEP, out, title=f"stabkit stability atlas — suite {suite.name}",
                      description=suite.description, command=meta.get("command", ""), policy=policy,
                      titles=titles, extras=extras)
