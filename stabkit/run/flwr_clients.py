"""Calling a user's Flower ``ClientApp`` in-process, once per client, trajectory and round (``--flwr-app``).

Each call gets its own copy of the train message (as a node does over the network), a ``Context`` of its
own that persists across rounds (``node_config``: ``partition-id`` and ``num-partitions``, Flower's simulation
convention), and ``torch``, ``numpy`` and ``random`` seeded from ``(seed, pair, round, node)`` -- the same key in
both trajectories of a pair (torch's generator is put back afterwards; ``random`` and ``numpy.random`` are left
seeded, :func:`~stabkit.algorithms.flower.inprocess.flower_calls`). The reply is checked: no error, one
ArrayRecord with the keys, shapes and dtypes that were sent, one MetricRecord.
"""
from __future__ import annotations

import contextlib
import copy

from stabkit.algorithms.flower import inprocess as fl
from stabkit.errors import ConfigError
from stabkit.plugins import describe_error


@contextlib.contextmanager
def torch_seeded(key: int):
    """torch's global generators seeded from ``key`` (63 bits), the CPU one put back on exit. Without CUDA only
    the CPU generator is seeded: ``torch.manual_seed`` would queue a lazy CUDA seeding that records a stack
    trace, 14 ms per call. (torch is imported here, on the first call: refusals of the app come before it.)"""
    import torch

    state = torch.get_rng_state()
    seed = key & 0x7FFFFFFFFFFFFFFF
    if torch.cuda.is_available():
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)
    try:
        yield
    finally:
        torch.set_rng_state(state)


def node_context(node_id: int, partition: int, partitions: int):
    """A node's Flower ``Context``: its partition and the number of partitions, an empty state."""
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=node_id, node_config={"partition-id": partition, "num-partitions": partitions},
                   state=RecordDict(), run_config={})


def call_client(app, message, context, key: int, where: str) -> tuple:
    """``(reply, {name: ndarray})``: what the ClientApp ``app`` trains from ``message``; ``where`` names the call in
    errors (app, round, pair, trajectory, node)."""
    try:
        with fl.flower_calls(key, 2), torch_seeded(key):
            reply = app(copy.deepcopy(message), context)
    except Exception as e:
        raise ConfigError(f"{where}: the ClientApp raised {describe_error(e)}") from None
    return checked_reply(reply, message, where)


def checked_reply(reply, message, where: str) -> tuple:
    """``(reply, its arrays)``, after checking them against what ``message`` sent."""
    from flwr.app import Message

    if not isinstance(reply, Message):
        raise ConfigError(f"{where}: the ClientApp returned {type(reply).__name__}, expected a flwr.app.Message")
    if reply.has_error():
        raise ConfigError(f"{where}: the ClientApp replied with an error: {reply.error.reason}")
    sent = next(iter(message.content.array_records.values()))
    got = list(reply.content.array_records.values())
    if len(got) != 1 or len(reply.content.metric_records) != 1:
        raise ConfigError(f"{where}: the reply holds {len(got)} ArrayRecords and {len(reply.content.metric_records)} "
                          "MetricRecords, expected one of each (the trained arrays, and metrics with num-examples)")
    arrays = {k: a.numpy() for k, a in got[0].items()}
    want = {k: a.numpy() for k, a in sent.items()}
    if list(arrays) != list(want):
        raise ConfigError(f"{where}: the reply's arrays are {list(arrays)}, expected {list(want)} (the keys sent)")
    for k, a in arrays.items():
        if a.shape != want[k].shape or a.dtype != want[k].dtype:
            raise ConfigError(f"{where}: the reply's array {k!r} has shape {list(a.shape)} and dtype {a.dtype}, "
                              f"expected {list(want[k].shape)} and {want[k].dtype}")
    return reply, arrays


def same_arrays(a: dict, b: dict) -> bool:
    """The two replies' arrays are bitwise equal (NaNs in the same places with the same bits count as equal:
    a NaN both trajectories computed alike is a divergence, not nondeterminism)."""
    return all(a[k].shape == b[k].shape and a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes() for k in a)
