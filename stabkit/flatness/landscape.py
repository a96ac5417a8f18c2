"""``stabkit landscape``: the loss landscape of a run's saved global models (fedswa.md §3.9 L1, L2).

For the model of pair ``pair``, trajectory ``traj`` saved after round T:

* ``random``: the filter-normalised random-direction 2-D surface and its 1-D slice (directions drawn from
  ``seed`` alike for every run looked at);
* ``plane``: the model plane through the server model and round T's client models (replayed, see
  :mod:`stabkit.flatness.replay`), clients, their mean and the other trajectory's model projected as dots;
* ``paired``: the 1-D slice along x_T' - x_T between the pair's two trajectories, with both trajectories'
  training objectives and the test loss.

Train layer: the trajectory's training objective f = (1/M) sum_i F_i (all samples, or a fixed ``fraction``
of every client's samples, the ``--eval-fraction`` subset); test layer: the test split (the same fraction).
Every choice is returned in ``choices`` (written to ``landscape.json``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from stabkit.config.runconfig import RunConfig
from stabkit.config.taskoptions import SEED_LIMIT
from stabkit.engine.evaluation import Evaluator
from stabkit.engine.memory import require_memory
from stabkit.engine.threads import threads_for
from stabkit.errors import require
from stabkit.flatness.objective import Objective, check_fraction
from stabkit.flatness.replay import replay_clients
from stabkit.flatness.surfaces import Layers, model_plane, random_plane, segment
from stabkit.store.runstore import read_json
from stabkit.store.saved_models import TRAJ, load_flat, saved_rounds

SPAN_LIMIT = 100.0  # random directions have the model's filter norms: a span of 100 is 100 x the model's size


@dataclass(frozen=True)
class LandscapeSettings:
    """What is drawn and how (all recorded in the output)."""

    round: Optional[int] = None  # None: the last saved round
    pair: int = 0
    traj: str = "a"
    points: int = 21  # grid points per axis (2-D surfaces) and along the 1-D slices
    span: float = 1.0  # random directions: a, b in [-span, span] (filter-normalised units)
    seed: int = 0  # of the random directions: the same for every run compared
    orthogonalise: bool = False  # d2 <- d2 - proj_{d1} d2 (Li et al. draw them independently)
    fraction: float = 1.0  # of every client's training samples and of the test set
    margin: float = 0.3  # model plane: margin around the projected models, relative to their extent
    segment: tuple = (-0.5, 1.5)  # paired slice: s range of x_T + s (x'_T - x_T)
    plane: bool = True  # the model plane (needs a replay of rounds 1..T)

    def __post_init__(self):
        require(isinstance(self.points, int) and self.points >= 3, "points", self.points, "an integer >= 3")
        require(0 < self.span <= SPAN_LIMIT, "span", self.span, f"a positive number at most {SPAN_LIMIT:g} (the grid "
                "is [-span, span]^2 in filter-normalised units: span s moves the model s times its own size, and "
                "far beyond that the losses overflow)")
        require(isinstance(self.pair, int) and self.pair >= 0, "pair", self.pair, "a pair index (an integer >= 0)")
        require(isinstance(self.seed, int) and 0 <= self.seed < SEED_LIMIT, "seed", self.seed,
                "an integer in [0, 2**64)")
        require(0 < self.fraction <= 1, "fraction", self.fraction, "a fraction in (0, 1]")
        require(self.traj in TRAJ, "traj", self.traj, "a or b")
        require(self.margin >= 0, "margin", self.margin, "a non-negative number")
        require(self.segment[0] < self.segment[1], "segment", list(self.segment), "lo < hi")
        require(self.round is None or (isinstance(self.round, int) and self.round >= 0), "round", self.round,
                "a saved round (a non-negative integer)")

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["segment"] = list(self.segment)
        return d


def load_run_config(run_dir) -> RunConfig:
    path = Path(run_dir) / "config.json"
    require(path.is_file(), "run", str(run_dir), "a run directory written by `stabkit pair` (no config.json)")
    return RunConfig.from_dict(read_json(path, "config"))  # truncated or edited by hand: one line


def grid_bytes(points: int) -> float:
    """Memory of a ``points x points`` grid: the coordinates (two meshgrid arrays and their stack, float64)
    and the train and test losses at every point (float64)."""
    return float(points) ** 2 * 8 * (4 + 2 * 2)


def chosen_round(run_dir, wanted: Optional[int]) -> int:
    rounds = saved_rounds(run_dir)
    require(bool(rounds), "run", str(run_dir), "a run with saved models (run `stabkit pair` with --save-models)")
    return rounds[-1] if wanted is None else wanted


def saved_models_of(run_dir, round_: Optional[int], build: Callable, pair: int = 0) -> tuple:
    """``(cfg, T, x, engine)``: the run's config, the saved round T (default: the last saved), its models
    ``x [R, 2, d]`` and a fresh engine of the run, ``build(cfg)`` (``stabkit.run.experiment.rebuilt_engine``),
    whose model, data and neighbours the measures use; x on the engine's dtype and device. A round not saved,
    a bad or foreign model file and ``pair`` are refused in one line each."""
    cfg = load_run_config(run_dir)
    T = chosen_round(run_dir, round_)
    engine = build(cfg)
    x = load_flat(run_dir, T, engine.model.names, engine.model.shapes)
    require(pair < x.shape[0], "pair", pair, f"a pair index below {x.shape[0]} (the run's pairs)")
    return cfg, T, x.to(dtype=engine.model.dtype, device=engine.x.device), engine


def landscape(run_dir, s: LandscapeSettings, build: Callable) -> dict:
    """All surfaces of one run (see the module docstring); numpy arrays in the result. ``build(cfg)``: a
    fresh engine of the run (``stabkit.run.experiment.rebuilt_engine``)."""
    require_memory(grid_bytes(s.points), f"a {s.points} x {s.points} landscape grid", "choose fewer --points")
    cfg, T, x, engine = saved_models_of(run_dir, s.round, build, s.pair)
    model = engine.model
    check_fraction(s.fraction, engine.data)
    ev = Evaluator(model, engine.data, engine.nb, s.fraction, cfg.seed)
    tx, ty, _ = ev.train
    j = TRAJ.index(s.traj)
    q = 2 * s.pair + j
    layer = lambda row: Layers(Objective(model, tx, ty, ev.train_w[row:row + 1]), *ev.test)
    layers, other = layer(q), layer(2 * s.pair + 1 - j)
    theta, partner = x[s.pair, j], x[s.pair, 1 - j]
    out = {"run": str(run_dir), "algo": cfg.algo, "round": T, "d": model.d,
           "train_samples": int(len(tx)), "test_samples": int(len(ev.test[0]))}
    with threads_for(layers.flops):
        out["random"] = random_plane(layers, theta, model.shapes, s.seed, s.points, s.span, s.orthogonalise)
        paired = segment(layers, theta, partner, *s.segment, s.points)
        paired["train_other"] = segment(other, theta, partner, *s.segment, s.points)["train"]
        out["paired"] = paired
        if s.plane and T >= 1:
            x_replay, rec = replay_clients(engine, T)
            out["replay_max_abs_diff"] = float((x_replay - x).abs().max())
            clients = rec.clients[s.pair, j]
            out["plane"] = model_plane(layers, theta, clients, {"other trajectory": partner}, s.points, s.margin)
    out["choices"] = choices(s, cfg, out)
    return out


def choices(s: LandscapeSettings, cfg: RunConfig, out: dict) -> dict:
    """Every choice behind the surfaces, in words and values."""
    frac = "all" if s.fraction >= 1 else f"a fixed fraction {s.fraction:g} (the --eval-fraction subset)"
    return {
        "settings": s.to_dict(),
        "model": f"global model of pair {s.pair}, trajectory {s.traj}, saved after round {out['round']}",
        "train_layer": f"the trajectory's training objective f = (1/M) sum_i F_i on {frac} of every client's samples",
        "test_layer": f"test loss on {frac} of the test split",
        "random_directions": "d ~ N(0, I), filter-wise normalised to the model's filters (Li et al. 2018); "
                             "parameters with one dimension (biases, normalisation weights) get direction 0; "
                             f"drawn from seed {s.seed} alike for every run; "
                             + ("d2 orthogonalised against d1" if s.orthogonalise else "d1, d2 independent"),
        "grid": f"{s.points} x {s.points} points, a, b in [-{s.span:g}, {s.span:g}]",
        "normalisation_layers": "none in stabkit's models (no BatchNorm); GroupNorm weights are 1-D and ignored",
        "plane": "through the server model, spanned by the top two principal directions of round T's client "
                 "models minus the server model; client models from replaying rounds 1..T of the run with its "
                 "config (exact: runs are deterministic; replay_max_abs_diff compares x_T); grid covers every "
                 f"projected model with a margin of {s.margin:g} of their extent",
        "paired_slice": f"x_T + s (x'_T - x_T), s in [{s.segment[0]:g}, {s.segment[1]:g}], both trajectories' "
                        "training objectives and the test loss",
        "run_config": {k: v for k, v in cfg.to_dict().items() if k in ("algo", "hp", "task", "model", "rounds",
                                                                       "pairs", "perturb", "seed")},
    }
