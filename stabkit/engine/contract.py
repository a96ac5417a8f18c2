"""What the engine needs back from a plug-in algorithm's hooks, checked on every call.

A built-in algorithm is pinned by its tests; a plug-in is not. :class:`CheckedAlgorithm` stands in for a
plug-in algorithm in the engine: it calls each hook and checks what comes back -- the pair structure
``(tensor, dict)`` where one is due, tensor shapes (``[R, 2, s, d]`` client tensors, ``[R, 2, d]`` global
models and server state, ``[R, 2, rows, d]`` initial client state), the run's dtype, and state names against the algorithm's
declaration -- and turns a wrong result, or an exception the hook raises, into one ConfigError line naming
the plug-in and the hook. Everything else is delegated unchanged.
"""
from __future__ import annotations

import torch

from stabkit.errors import ConfigError, PluginFailed  # noqa: F401 (PluginFailed: imported from here too)
from stabkit.plugins import describe_error


class CheckedAlgorithm:
    """``algo``'s hooks with their results checked (``label``: the ``--algo`` name the errors give)."""

    def __init__(self, algo, label: str):
        self._algo, self._label = algo, label

    def __getattr__(self, name):
        return getattr(self._algo, name)

    def _fail(self, hook: str, what: str) -> PluginFailed:
        return PluginFailed(f"invalid algo={self._label!r}: its {hook} {what}")

    def _call(self, hook: str, *args):
        try:
            return getattr(self._algo, hook)(*args)
        except ConfigError:
            raise
        except Exception as e:  # the plug-in's own code failed
            raise self._fail(hook, f"raised {describe_error(e)}") from None

    def _pair(self, hook: str, out, first: str, second: str) -> tuple:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise self._fail(hook, f"returned {_kind(out)}, expected a tuple ({first}, {second})")
        return out

    def _tensor(self, hook: str, name: str, value, shape: tuple, dtype: torch.dtype) -> None:
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape):
            got = f"shape {list(value.shape)}" if isinstance(value, torch.Tensor) else _kind(value)
            raise self._fail(hook, f"returned {name} of {got}, expected a tensor of shape {list(shape)}")
        if value.dtype != dtype:  # a promoted state fails later, deep in the engine, as a dtype mismatch
            raise self._fail(hook, f"returned {name} of dtype {value.dtype}, expected {dtype}: every tensor a hook "
                                   f"returns keeps the run's dtype (--dtype); convert with .to(ctx.x.dtype)")

    def _states(self, hook: str, what: str, states, declared, shape: tuple, dtype: torch.dtype) -> None:
        """``states`` must be a dict of exactly the declared names (every hook returns its state whole, as the
        engine requires of every algorithm), each a tensor of ``shape`` and ``dtype``."""
        if not isinstance(states, dict):
            raise self._fail(hook, f"returned {what} as {_kind(states)}, expected a dict of tensors")
        if set(states) != set(declared):
            raise self._fail(hook, f"returned {what} {sorted(states)}, but the algorithm declares "
                                   f"{sorted(declared)} (every hook returns its state whole)")
        for name, value in states.items():
            self._tensor(hook, f"{what} {name!r}", value, shape, dtype)

    def init_state(self, x, num_rows):
        server, client = self._pair("init_state", self._call("init_state", x, num_rows), "server", "client")
        R, two, d = x.shape
        self._states("init_state", "server state", server, self.server_state, (R, two, d), x.dtype)
        self._states("init_state", "client state", client, self.client_state, (R, two, num_rows, d), x.dtype)
        return server, client

    def local_lrs(self, lr, K):
        lrs = self._call("local_lrs", lr, K)
        if not (isinstance(lrs, (tuple, list)) and len(lrs) == K
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in lrs)):
            raise self._fail("local_lrs", f"returned {_kind(lrs)}, expected {K} numbers (one per local step)")
        return lrs

    def _local(self, hook: str, ctx, out):
        y, local = self._pair(hook, out, "y", "local state")
        self._tensor(hook, "y", y, ctx.x_clients.shape, ctx.x.dtype)
        self._states(hook, "local state", local, self.local_state, ctx.x_clients.shape, ctx.x.dtype)
        return y, local

    def client_init(self, ctx):
        y, local = self._local("client_init", ctx, self._call("client_init", ctx))
        # the default start is x_t's broadcast view (no copies: the built-ins never write into y); a plug-in's
        # hooks may update y in place, so a plug-in starts from its own copy, as every algorithm did before
        if y.untyped_storage().data_ptr() == ctx.x.untyped_storage().data_ptr():
            y = y.clone()
        return y, local

    def grad_point(self, ctx, step, y, local):
        z = self._call("grad_point", ctx, step, y, local)
        self._tensor("grad_point", "the gradient point", z, ctx.x_clients.shape, ctx.x.dtype)
        return z

    def client_step(self, ctx, step, y, local, g):
        return self._local("client_step", ctx, self._call("client_step", ctx, step, y, local, g))

    def client_final(self, ctx, start, y, local):
        out = self._call("client_final", ctx, start, y, local)
        uploads, client = self._pair("client_final", out, "uploads", "client state")
        shape = ctx.x_clients.shape
        if not isinstance(uploads, dict) or not uploads:
            raise self._fail("client_final", f"returned uploads as {_kind(uploads)}, expected a non-empty dict "
                                             "of tensors")
        for name, value in uploads.items():
            self._tensor("client_final", f"upload {name!r}", value, shape, ctx.x.dtype)
        self._states("client_final", "client state", client, self.client_state, shape, ctx.x.dtype)
        return uploads, client

    def server_update(self, ctx, means):
        x, server = self._pair("server_update", self._call("server_update", ctx, means), "x", "server state")
        self._tensor("server_update", "x", x, ctx.x.shape, ctx.x.dtype)
        self._states("server_update", "server state", server, self.server_state, ctx.x.shape, ctx.x.dtype)
        return x, server


def _kind(value) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a {type(value).__name__}"
