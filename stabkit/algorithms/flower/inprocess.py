"""Driving a Message-API Flower strategy in-process, without a network (flwr 1.42).

A round is what Flower's ServerApp loop does, minus the transport: ``configure_train`` is handed a stand-in
grid whose ``get_node_ids()`` is the cohort stabkit sampled (the bridge set the sampling arguments so that the
strategy takes all of it), each message is answered with
``Message(RecordDict({"arrays": ArrayRecord, "metrics": MetricRecord({"num-examples": n})}), reply_to=m)``
(through Flower's own client-side clipping mod when the strategy is a client-side differential-privacy
wrapper), and ``aggregate_train`` returns the new arrays or None. The process's Flower task identity is set
for the calls, Flower's INFO log silenced for good (:func:`quiet_flower`) and the objects that exist before a
call exempt from the garbage collections Flower starts; Python's ``random`` and ``numpy.random`` are seeded
from a key of stabkit's coupled streams before each call (so both trajectories of a pair draw the same DP noise
and break ties alike).
"""
from __future__ import annotations

import contextlib
import gc
import logging
import random

import numpy as np

from stabkit.algorithms.flower.arrays import flwr_app, to_array, to_numpy

ARRAY = "theta"  # the key of the one (flat) parameter array in every ArrayRecord
SERVER_NODE = 1  # Flower's SuperLink node id; client node ids are the logical client ids + NODE_OFFSET
NODE_OFFSET = 2
CONFIGURE, AGGREGATE = "configure_train", "aggregate_train"  # the strategy methods a round calls (for errors)


class CohortGrid:
    """What ``configure_train`` reads from its grid: the ids of the connected nodes (the round's cohort)."""

    def __init__(self, node_ids):
        self._ids = [int(n) for n in node_ids]

    def get_node_ids(self):
        return list(self._ids)


_QUIET: list = []  # Flower's logger once it is quiet


def quiet_flower() -> None:
    """Flower's logger at WARNING from here on: its strategies log INFO lines on every call (a line per pair,
    trajectory and round), and setting the level back after every call would clear the logging cache each time
    (a third of the bridge's own time on W1)."""
    if not _QUIET:
        _QUIET.append(logging.getLogger("flwr"))
    if _QUIET[0].level < logging.WARNING:
        _QUIET[0].setLevel(logging.WARNING)


@contextlib.contextmanager
def flower_calls(key: int, phase: int):
    """Calls into Flower: task identity set (and put back on exit), INFO log off (:func:`quiet_flower`),
    ``random`` and ``numpy.random`` seeded from ``(key, phase)``. The generators are left seeded, not put back:
    stabkit's own randomness never reads them, and saving and restoring numpy's state costs more than a W1
    round's own work on the client replies."""
    from flwr.supercore.task_identity import TaskIdentity

    saved_ids = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, SERVER_NODE, 1
    quiet_flower()
    random.seed(key * 4 + phase)
    np.random.seed((key ^ (key >> 32) ^ (phase * 0x9E3779B9)) & 0xFFFFFFFF)  # an int seeds 50x faster than a list
    gc.freeze()  # Flower's ArrayRecord.to_numpy_ndarrays(keep_input=False) calls gc.collect(): without the
    # freeze every call walks all of torch's objects (0.4 s per call, Bulyan's round took seconds); with it, the
    # objects made since
    try:
        yield
    finally:
        gc.unfreeze()
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved_ids


def array_record(arrays: dict):
    """``{name: ndarray}`` as an ArrayRecord of fresh Arrays (:func:`~.arrays.to_array`), set item by item (its
    constructor would build every Array a second time)."""
    record = flwr_app().ArrayRecord()
    for k, v in arrays.items():
        record[k] = to_array(v)
    return record


def configure(strategy, server_round: int, arrays: dict, node_ids) -> list:
    """The strategy's train messages for the round (model ``arrays``), sorted by destination node id."""
    messages = strategy.configure_train(server_round, array_record(arrays), flwr_app().ConfigRecord(),
                                        CohortGrid(node_ids))
    return sorted(messages, key=lambda m: m.metadata.dst_node_id)


def node_of(message) -> int:
    return message.metadata.dst_node_id


def aggregate(strategy, server_round: int, replies: list):
    """The aggregated ArrayRecord, or None."""
    arrays, _ = strategy.aggregate_train(server_round, replies)
    return arrays


def config_of(message) -> dict:
    """The config a train message sends (its ConfigRecord's items; empty if none)."""
    records = list(message.content.config_records.values())
    return dict(records[0]) if records else {}


def reply(message, arrays: dict, num_examples: int, mod=None):
    """The client's answer to ``message``: its trained ``arrays`` and ``num-examples``, passed through Flower's
    client ``mod`` (e.g. ``fixedclipping_mod``) when one is given."""
    app = flwr_app()

    def answer(msg, _context):
        return app.Message(app.RecordDict({"arrays": array_record(arrays),
                                           "metrics": app.MetricRecord({"num-examples": num_examples})}),
                           reply_to=msg)

    return answer(message, None) if mod is None else mod(message, None, answer)


def client_mod(strategy):
    """Flower's client-side mod a client-side differential-privacy wrapper expects of its clients, or None."""
    from flwr.clientapp import mod
    from flwr.serverapp.strategy import (
        DifferentialPrivacyClientSideAdaptiveClipping,
        DifferentialPrivacyClientSideFixedClipping,
    )

    if isinstance(strategy, DifferentialPrivacyClientSideAdaptiveClipping):
        return mod.adaptiveclipping_mod
    if isinstance(strategy, DifferentialPrivacyClientSideFixedClipping):
        return mod.fixedclipping_mod
    return None


def unpack(arrays, like: dict):
    """``{name: ndarray}`` of an aggregated ArrayRecord (or mapping of ndarrays), cast to the dtypes of
    ``like`` (the arrays the round started from), or a one-line description of what is wrong: other keys,
    another shape, not floats."""
    keys = list(arrays.keys())
    if keys != list(like):
        return f"arrays {keys}, expected {list(like)}"
    out = {}
    for k, a in arrays.items():
        x = a if isinstance(a, np.ndarray) else to_numpy(a, like[k])
        if x.shape != like[k].shape or x.dtype.kind != "f":
            return (f"an array {k!r} of shape {list(x.shape)} and dtype {x.dtype}, expected shape "
                    f"{list(like[k].shape)} of a float dtype")
        out[k] = x.astype(like[k].dtype, copy=False)
    return out
