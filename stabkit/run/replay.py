"""Client models of a saved round, by replaying the run through the round loop (``stabkit.run.loop``).

The model-plane picture (docs/flatness.md, L2; the FedSWA paper's Fig. 1(f) / Fig. 2) needs the clients' local
models θ_{i,K} of a round next to the server model. A run saves only global models, and the local models
of stateful algorithms (FedMoSWA's control variates, MoFedSAM's momentum, ...) depend on state the saved
models do not hold, so restarting local training from a saved x_T would give other client models than the
run had. A paired run is deterministic (same seed -> identical metrics), so the run is replayed from its
configuration through round T: round T's clients and their final local models are exactly the ones whose
average (with the algorithm's server step) gave x_T, and the replayed x_T is checked against the saved one.
"""
from __future__ import annotations

from stabkit.engine.determinism import deterministic
from stabkit.engine.paired import PairedEngine
from stabkit.errors import require
from stabkit.run.loop import EngineRounds, run_rounds


def replay_clients(engine: PairedEngine, T: int) -> tuple:
    """Run a freshly built engine through round T; return (x_T ``[R, 2, d]``, round T's record with
    ``clients [R, 2, s, d]`` and ``rows [R, 2, s]``)."""
    require(T >= 1, "round", T, "a round >= 1 for client models (round 0 is the shared start: no clients yet)")
    with deterministic():  # as during the run
        state = run_rounds(EngineRounds((engine,), T, keep_clients=(T,)))
    return engine.x, state.record
