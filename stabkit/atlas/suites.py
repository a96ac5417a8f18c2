"""Atlas suites: the tasks every algorithm is measured on, at settings shared by all algorithms of a task.

A suite is a list of :class:`SuiteTask` (a name, the run settings every algorithm shares on it, and the
floor below which a model is said not to learn), the perturbations and the replicate seeds. ``small`` runs
on a laptop's CPU; ``paper`` uses the papers' presets (data files from ``--data-dir``) for a GPU or a
cluster; ``ci`` is the small suite shrunk to seconds, for the tests.

**Learning rates** (:data:`POLICY`, printed on the page). Every algorithm of a task runs at the task's shared client lr, K, B and T (the
default run on digits: η_l = 0.05, K = 10, B = 16; the same on the convex and quadratic tasks,
where L = 1), at its paper-default hyperparameters, with server lr η = 1 — so algorithms are compared at
equal settings, not each at its own tuned lr. A cell whose model does not learn at that setting (below its
task's :class:`~stabkit.atlas.floors.LearningFloor`) is flagged ``no learning`` and kept out of rankings,
frontier and correlations: stability at an lr that does not train says nothing. The ``paper`` suite applies each
paper's code readings per algorithm (``stabkit presets``), e.g. FedAdam's η = 0.1.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from stabkit.atlas.floors import DEFAULT_FLOOR, LearningFloor
from stabkit.config.presets import preset_reading, preset_values
from stabkit.config.runconfig import PERTURBATIONS
from stabkit.errors import require


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite: its name, the settings shared by every algorithm, and the learning floor."""

    name: str
    title: str
    values: dict                      # config keys (as in a sweep spec's base) every algorithm shares here
    floor: LearningFloor = DEFAULT_FLOOR  # below it, the task's model is said not to learn
    preset: str | None = None         # the paper preset whose per-algorithm code readings apply
    pairs: dict = field(default_factory=dict)  # perturbation -> pairs per job (default: the suite's)

    def algo_values(self, algo: str) -> dict:
        """Per-algorithm settings on this task (a preset's code reading), ``hp`` included."""
        if self.preset is None:
            return {}
        reading = preset_reading(self.preset, algo)
        return {**reading.run, **({"hp": dict(reading.hp)} if reading.hp else {})}


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    tasks: tuple
    perturbs: tuple = ("client", "sample")
    seeds: tuple = (0, 1)
    common: dict = field(default_factory=dict)  # config keys shared by every task of the suite
    needs_data: bool = False
    ci_target: float | None = None  # top up cells wider than this share of D_T (stabkit.atlas.topup); None: no


# Shared by every algorithm of every small-suite task. Losses and accuracies every 10th round (and at T):
# the atlas reads them at 0 and T; the discrepancy is logged every round. No checkpoints: a sweep resumes
# job by job and drops a job's checkpoint (they were 5% of the suite's time).
_SHARED = dict(lr=0.05, local_steps=10, batch_size=16, global_lr=1.0, pairs=8, rounds=100, clients=20,
               participation=0.25, eval_every=10, checkpoint_every=0)
# Pairs per job: sample perturbation acts only when the replaced sample is drawn, so its D_T varies far more
# between pairs (coefficient of variation 0.6-1.2 at T = 100, against 0.02-0.3 under client perturbation).
_PAIRS = {"client": 8, "sample": 32, "remove-client": 8, "remove-sample": 32}
_SMALL_TASKS = (
    SuiteTask("digits", "digits MLP (non-convex)", dict(task="digits", model="mlp"),
              LearningFloor(acc=0.5), pairs=_PAIRS),
    SuiteTask("synthetic", "Synthetic(1,1) logistic (convex)", dict(task="synthetic", model="logistic"),
              LearningFloor(acc=0.25), pairs=_PAIRS),
    SuiteTask("quadratic", "quadratic, L = 1, μ = 0.1 (known constants)", dict(task="quadratic", model="linear"),
              LearningFloor(loss_ratio=0.75), pairs=dict(_PAIRS, client=16, **{"remove-client": 16})),
)
# The same tasks at CI size (16 rounds of K = 5 do not train digits to 0.5: its floor there is 0.25).
_CI_TASKS = (
    dataclasses.replace(_SMALL_TASKS[0], floor=LearningFloor(acc=0.25), pairs={}),
    dataclasses.replace(_SMALL_TASKS[1], pairs={}),
    dataclasses.replace(_SMALL_TASKS[2], pairs={}),
)

# The page's policy line, its floors read from the small suite's tasks.
POLICY = ("Every algorithm of a task runs at the task's shared client lr, K, B and T (η_l = 0.05, K = 10, B = 16 "
          "on every small-suite task, stabkit pair's default digits run; L = 1 on the quadratic), at its "
          "paper-default hyperparameters and server lr η = 1, so all are compared at equal settings; no per-"
          "algorithm tuning. A cell whose model does not learn there ("
          + "; ".join(f"{t.name}: {t.floor.describe()}" for t in _SMALL_TASKS) + "; chance accuracy is 0.1) "
          "is flagged 'no learning' and kept out of the rankings, the frontier and the correlations. The paper "
          "suite applies each paper's code reading per algorithm (stabkit presets), e.g. FedAdam's η = 0.1.")

SUITES = {
    "small": Suite("small", "digits MLP, Synthetic(1,1) logistic and a quadratic with known constants; "
                   "20 clients, s = 5, K = 10, B = 16, η_l = 0.05, η = 1, 100 rounds, 2 seeds x 8 pairs (client "
                   "perturbation; 16 on the quadratic) or 32 pairs (sample perturbation), metrics every 10 rounds "
                   "(CPU, minutes), then more pairs for every cell whose D_T interval is wider than ±10%",
                   _SMALL_TASKS, common=_SHARED, ci_target=0.1),
    "ci": Suite("ci", "the small suite's tasks at CI size: 10 clients, K = 5, 16 rounds, 6 pairs x 2 seeds "
                "(seconds)", _CI_TASKS,
                common=dict(_SHARED, rounds=16, pairs=6, clients=10, participation=0.3, local_steps=5,
                            heldout_clients=4, constants=False, eval_every=None)),
    "paper": Suite("paper", "the FedSAGD paper's CIFAR-10 (FedAvg CNN) and EMNIST-L (logistic) settings with "
                   "each algorithm's code reading (stabkit presets fedsagd-cifar10 / fedsagd-emnist); data files "
                   "from --data-dir; for a GPU or a cluster",
                   (SuiteTask("cifar10", "CIFAR-10, FedAvg CNN (FedSAGD Setting I)", preset_values("fedsagd-cifar10"),
                              LearningFloor(acc=0.2), preset="fedsagd-cifar10"),
                    SuiteTask("emnist_l", "EMNIST-L a-j, logistic (FedSAGD Setting II)",
                              preset_values("fedsagd-emnist"), LearningFloor(acc=0.2), preset="fedsagd-emnist")),
                   seeds=(0,), common=dict(pairs=4), needs_data=True),
}


def scaled(suite: Suite, seeds: int | None = None, pairs: int | None = None, perturbs: str | None = None) -> Suite:
    """``suite`` with ``seeds`` replicate seeds (0..seeds-1) and/or ``pairs`` pairs in every job (the
    description says so: a smaller or larger version of the suite, never passed off as the suite), and/or the
    perturbation columns ``perturbs`` (comma-separated, e.g. ``client,sample,remove-client``: a table per task
    and perturbation; the leave-one-out columns take the pairs of their replace-one counterparts)."""
    changes, notes = {}, []
    if perturbs is not None:
        names = tuple(p.strip() for p in str(perturbs).split(",") if p.strip())
        require(names and all(p in PERTURBATIONS for p in names) and len(set(names)) == len(names), "perturbs",
                perturbs, f"distinct comma-separated perturbations from {', '.join(PERTURBATIONS)}")
        if names != suite.perturbs:
            changes["perturbs"] = names
            notes.append(f"perturbations {', '.join(names)}")
    if seeds is not None:
        require(isinstance(seeds, int) and seeds >= 1, "seeds", seeds, "a positive integer")
        changes["seeds"], notes = tuple(range(seeds)), [f"{seeds} seed(s)"]
    if pairs is not None:
        require(isinstance(pairs, int) and pairs >= 2, "pairs", pairs, "an integer >= 2 (a CI needs two pairs)")
        changes["common"] = {**suite.common, "pairs": pairs}
        changes["tasks"] = tuple(dataclasses.replace(t, pairs={}) for t in suite.tasks)
        notes.append(f"{pairs} pairs per job")
    if not changes:
        return suite
    return dataclasses.replace(suite, description=f"{suite.description} — RUN AT A CHANGED SCALE: "
                               f"{', '.join(notes)}", **changes)


def get_suite(name: str) -> Suite:
    require(name in SUITES, "suite", name, f"one of {', '.join(SUITES)}")
    return SUITES[name]


def suite_rows(suite: Suite, algos: list, data_dir: str | None = None) -> list:
    """One config mapping per (task, perturbation, algorithm): the suite's shared values, the task's (its
    pairs under that perturbation), the algorithm's."""
    rows = []
    for algo in algos:  # algorithm-major: an interrupted atlas has whole algorithms done
        for task in suite.tasks:
            for perturb in suite.perturbs:
                values = {**suite.common, **task.values, "perturb": perturb, **task.algo_values(algo), "algo": algo}
                if perturb in task.pairs:
                    values["pairs"] = task.pairs[perturb]
                if suite.needs_data:
                    values["data_dir"] = data_dir
                rows.append(values)
    return rows


def suite_spec_dict(suite: Suite, algos: list, data_dir: str | None = None) -> dict:
    """The sweep spec of ``suite`` over ``algos``: (task, perturbation, algorithm) rows zipped, seeds product.

    Keys that are equal in every row go to the base; the others become zipped axes (``None`` where a row
    leaves a key unset), so the atlas is one resumable sweep."""
    rows = suite_rows(suite, algos, data_dir)
    keys = list(dict.fromkeys(k for r in rows for k in r))
    base = {k: rows[0][k] for k in keys if all(k in r and r[k] == rows[0][k] for r in rows)}
    order = ["task", "perturb"] + [k for k in keys if k not in base and k not in ("task", "perturb", "algo")] + ["algo"]
    zipped = {k: [r.get(k) for r in rows] for k in order if k not in base}
    return {"name": f"atlas-{suite.name}", "base": base, "zip": zipped,
            "product": {"seed": list(suite.seeds)}}
