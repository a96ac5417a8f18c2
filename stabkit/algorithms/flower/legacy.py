"""Driving a legacy Flower strategy (``flwr.server.strategy.Strategy``: ``configure_fit`` / ``aggregate_fit``)
in-process, with the same functions as :mod:`.inprocess` has for the Message API, so the bridge drives either.

``configure_fit`` is handed a stand-in client manager whose clients are the round's cohort (client id = node id,
as a string) and which hands them all out, sorted; each ``FitIns`` is answered with
``FitRes(Status(OK), ndarrays_to_parameters([theta]), num_examples, {})``; ``aggregate_fit``'s Parameters become
the new global model. The constructor's ``initial_parameters`` (FedOpt's needs them) are set by the bridge to
the pair's x_0.
"""
from __future__ import annotations

from stabkit.algorithms.flower.inprocess import ARRAY

CONFIGURE, AGGREGATE = "configure_fit", "aggregate_fit"  # the strategy methods a round calls (for errors)


class CohortClient:
    """What a legacy strategy reads from a client proxy: its id."""

    def __init__(self, node_id: int):
        self.cid = str(node_id)


class CohortManager:
    """The part of Flower's ClientManager a legacy strategy's ``configure_fit`` calls: the round's cohort."""

    def __init__(self, node_ids):
        self._clients = [CohortClient(int(n)) for n in node_ids]

    def num_available(self) -> int:
        return len(self._clients)

    def all(self) -> dict:
        return {c.cid: c for c in self._clients}

    def sample(self, num_clients: int, min_num_clients=None, criterion=None) -> list:
        return list(self._clients[:num_clients])


def parameters(arrays: dict):
    from flwr.common import ndarrays_to_parameters

    return ndarrays_to_parameters(list(arrays.values()))


def configure(strategy, server_round: int, arrays: dict, node_ids) -> list:
    """``[(client, FitIns)]`` of the round, sorted by node id."""
    pairs = strategy.configure_fit(server_round, parameters(arrays), CohortManager(node_ids))
    return sorted(pairs, key=node_of)


def node_of(instruction) -> int:
    return int(instruction[0].cid)


def config_of(instruction) -> dict:
    return dict(instruction[1].config)


def reply(instruction, arrays: dict, num_examples: int, mod=None):
    """``(client, FitRes)`` carrying the client's trained arrays (legacy clients take no Message-API mods)."""
    from flwr.common import Code, FitRes, Status

    return instruction[0], FitRes(Status(Code.OK, ""), parameters(arrays), num_examples, {})


def aggregate(strategy, server_round: int, replies: list):
    """The aggregated ``{ARRAY: ndarray}``, or None."""
    from flwr.common import parameters_to_ndarrays

    new, _ = strategy.aggregate_fit(server_round, replies, [])
    if new is None:
        return None
    arrays = parameters_to_ndarrays(new)
    return {ARRAY: arrays[0]} if len(arrays) == 1 else {f"array {i}": a for i, a in enumerate(arrays)}


def client_mod(strategy):
    return None
