"""One-line checks every algorithm should pass, on a real paired run (digits, MLP, minibatches).

* :func:`assert_null_pair_zero`: with nothing perturbed the two trajectories stay bit-for-bit equal
  (global model, server state, every client's state) in every round;
* :func:`assert_deterministic`: the same configuration twice gives bit-for-bit the same states;
* :func:`assert_reduces_to`: with hyperparameters ``hp`` the algorithm *is* a reference algorithm, bit
  for bit, on a run whose perturbation really separates the trajectories.

``algo`` is an ``--algo`` name, an import path ``package.module:Class`` or a module-level Algorithm
subclass; ``cfg`` overrides the small default run (:data:`RUN`), e.g. ``weight_decay=1e-3``.
"""
from __future__ import annotations

import torch

from stabkit import plugins
from stabkit.config.runconfig import RunConfig
from stabkit.run.experiment import PairedRun

RUN = dict(rounds=4, pairs=2, local_steps=3, weight_decay=1e-3, eval_every=4)


def _name(algo) -> str:
    return plugins.import_path_of(algo) if isinstance(algo, type) else algo


def _states(run: PairedRun) -> dict:
    """Every tensor of the engine's state by name: x, server state, client state ``[R, 2, ...]``."""
    eng = run.engine
    return {"x": eng.x, **{f"server {k}": v for k, v in eng.server.items()},
            **{f"client {k}": v for k, v in eng.client_state.items()}}


def _rounds(cfg: RunConfig):
    """A paired run of ``cfg``, yielding ``(t, run)`` after each round t = 1..T."""
    run = PairedRun(cfg)
    for t in range(cfg.rounds):
        run.step()
        yield t + 1, run


def assert_null_pair_zero(algo, hp=None, **cfg) -> None:
    """The null pair (``perturb="none"``) keeps both trajectories exactly equal in every round."""
    config = RunConfig(algo=_name(algo), hp=hp or {}, **{**RUN, **cfg, "perturb": "none"})
    for t, run in _rounds(config):
        for name, v in _states(run).items():
            diff = (v[:, 0] - v[:, 1]).abs().max().item()
            assert diff == 0, (f"assert_null_pair_zero: {config.algo} {name} differs between the trajectories of "
                               f"the null pair after round {t} (max |a - b| = {diff:.3g})")


def assert_deterministic(algo, hp=None, **cfg) -> None:
    """Two runs of the same configuration (client perturbation by default) agree bit for bit every round."""
    config = RunConfig(algo=_name(algo), hp=hp or {}, **{**RUN, **cfg})
    for (t, a), (_, b) in zip(_rounds(config), _rounds(config)):
        for name, v in _states(a).items():
            assert torch.equal(v, _states(b)[name]), (f"assert_deterministic: {config.algo} {name} differs "
                                                      f"between two runs of the same seed after round {t}")


def assert_reduces_to(algo, reference_algo, hp=None, reference_hp=None, **cfg) -> None:
    """``algo`` with ``hp`` computes exactly what ``reference_algo`` with ``reference_hp`` computes: the
    global models of both trajectories are bitwise equal after every round of a client-perturbed run
    (and that run's trajectories do separate, so the check is not vacuous)."""
    base = {**RUN, **cfg}
    mine = RunConfig(algo=_name(algo), hp=hp or {}, **base)
    ref = RunConfig(algo=_name(reference_algo), hp=reference_hp or {}, **base)
    for (t, a), (_, b) in zip(_rounds(mine), _rounds(ref)):
        diff = (a.engine.x - b.engine.x).abs().max().item()
        assert diff == 0, (f"assert_reduces_to: {mine.algo} with hp={mine.hp} is not {ref.algo} with "
                           f"hp={ref.hp}: global models differ after round {t} (max |diff| = {diff:.3g})")
    separated = a.engine.discrepancy().min()
    assert separated > 0, (f"assert_reduces_to: the perturbed run's trajectories did not separate "
                           f"(min discrepancy {separated:.3g}); the check would be vacuous")
