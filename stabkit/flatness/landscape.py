"""``stabkit landscape``: the loss landscape of a run's saved global models (docs/flatness.md, L1 and L2).

For the model of pair ``pair``, trajectory ``traj`` saved after round T:

* ``random``: the filter-normalised random-direction 2-D surface and its 1-D slice (directions drawn from
  ``seed`` alike for every run looked at);
* ``plane``: the model plane through the server model and round T's client models (replayed, see
  :mod:`stabkit.run.replay`), clients, their mean and the other trajectory's model projected as dots;
* ``paired``: the 1-D slice along x_T' - x_T between the pair's two trajectories, with both trajectories'
  training objectives and the test loss.

Train layer: the trajectory's training objective f = (1/M) sum_i F_i (all samples, or a fixed ``fraction``
of every client's samples, the ``--eval-fraction`` subset); test layer: the test split (the same fraction).
Every choice is returned in ``choices`` (written to ``landscape.json``).
"""
from __future__ import annotations

from typing import Callable

from stabkit.config.runconfig import RunConfig
from stabkit.engine.evaluation import Evaluator
from stabkit.engine.threads import threads_for
from stabkit.flatness.objective import Objective, check_fraction
from stabkit.flatness.settings import LandscapeSettings, SavedRun
from stabkit.flatness.surfaces import Layers, model_plane, random_plane, segment
from stabkit.store.saved_models import load_flat
from stabkit.trajectories import TRAJ


def saved_models_of(run: SavedRun, build: Callable) -> tuple:
    """``(x, engine)``: the models ``x [R, 2, d]`` of ``run``'s round and a fresh engine of the run,
    ``build(cfg)`` (``stabkit.run.experiment.rebuilt_engine``), whose model, data and neighbours the measures
    use; x on the engine's dtype and device. A model file that cannot be read or holds another architecture
    is refused in one line."""
    engine = build(run.cfg)
    x = load_flat(run.path, run.round, engine.model.names, engine.model.shapes)
    return x.to(dtype=engine.model.dtype, device=engine.x.device), engine


def landscape(run: SavedRun, s: LandscapeSettings, build: Callable, replay: Callable) -> dict:
    """All surfaces of one run (see the module docstring), opened at round ``s.round`` with pair ``s.pair``
    checked (:func:`~stabkit.flatness.settings.open_saved`); numpy arrays in the result. ``build(cfg)``: a fresh
    engine of the run (``stabkit.run.experiment.rebuilt_engine``); ``replay(engine, T)``: x_T and round T's
    record with its clients, replayed (``stabkit.run.replay.replay_clients``)."""
    cfg, T = run.cfg, run.round
    x, engine = saved_models_of(run, build)
    model = engine.model
    check_fraction(s.fraction, engine.data)
    ev = Evaluator(model, engine.data, engine.nb, s.fraction, cfg.seed)
    tx, ty, _ = ev.train
    j = TRAJ.index(s.traj)
    q = 2 * s.pair + j
    layer = lambda row: Layers(Objective(model, tx, ty, ev.train_w[row:row + 1]), *ev.test)
    layers, other = layer(q), layer(2 * s.pair + 1 - j)
    theta, partner = x[s.pair, j], x[s.pair, 1 - j]
    out = {"run": str(run.path), "algo": cfg.algo, "round": T, "d": model.d,
           "train_samples": int(len(tx)), "test_samples": int(len(ev.test[0]))}
    with threads_for(layers.flops):
        out["random"] = random_plane(layers, theta, model.shapes, s.seed, s.points, s.span, s.orthogonalise)
        paired = segment(layers, theta, partner, *s.segment, s.points)
        paired["train_other"] = segment(other, theta, partner, *s.segment, s.points)["train"]
        out["paired"] = paired
        if s.plane and T >= 1:
            x_replay, rec = replay(engine, T)
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
