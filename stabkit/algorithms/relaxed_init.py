"""Relaxed initialisation (RI, FedInit Algorithm 1 line 6; fedinit.md §1.1-1.3) for any algorithm.

Each client starts local training from ``x_t + beta (x_t - last_i)``, where ``last_i`` is its final local
model from its previous participation (``x_0`` before the first one), and remembers its new final local
model. Everything else in the wrapped method is unchanged ("irrelevant to the local optimizer").
Aggregation variants (UNCERTAIN F-U1): ``model_avg`` (paper line 16: uploads are measured from x_t, so
with eta = 1 the server takes the mean of the final local models) and ``delta_from_init`` (reference code:
uploads are measured from the RI start point, which also applies the RI correction at the server).
beta = 0 is the wrapped method bit for bit.
"""
from __future__ import annotations


from stabkit.algorithms.base import Algorithm
from stabkit.errors import ConfigError

AGGREGATIONS = ("model_avg", "delta_from_init")


class RelaxedInit(Algorithm):
    """``inner`` with relaxed initialisation ``beta`` and the chosen aggregation."""

    def __init__(self, inner: Algorithm, beta: float, aggregation: str = "model_avg"):
        self.inner, self.beta, self.aggregation = inner, beta, aggregation
        self.p = inner.p
        self.name, self.title = f"{inner.name}+ri", f"{inner.title} + RI"
        self.reference = inner.reference
        self.server_state = inner.server_state
        self.client_state = tuple(inner.client_state) + ("ri_last",)

    def init_state(self, x0, num_rows):
        server, client = self.inner.init_state(x0, num_rows)
        client["ri_last"] = x0[:, :, None, :].expand(-1, -1, num_rows, -1).clone()
        return server, client

    def client_start(self, ctx, y):
        return self.inner.client_start(ctx, y) + self.beta * (ctx.x0 - ctx.client["ri_last"])

    def grad_point(self, ctx, y, k):
        return self.inner.grad_point(ctx, y, k)

    def step_lr(self, ctx, k):
        return self.inner.step_lr(ctx, k)

    def local_step(self, ctx, y, g, k):
        return self.inner.local_step(ctx, y, g, k)

    def client_finish(self, ctx, y):
        uploads, new_client = self.inner.client_finish(ctx, y)
        if self.aggregation == "delta_from_init":
            uploads = {**uploads, "delta": uploads["delta"] - (ctx.start - ctx.x0)}
        return uploads, {**new_client, "ri_last": y}

    def server_update(self, ctx, means):
        return self.inner.server_update(ctx, means)


def with_relaxed_init(algo: Algorithm, beta: float, aggregation: str) -> Algorithm:
    """``algo`` wrapped with RI (``beta != 0``), or unchanged. An algorithm that already is RI (FedInit)
    takes its beta as a hyperparameter instead."""
    if not beta:
        return algo
    if isinstance(algo, RelaxedInit):
        raise ConfigError(f"invalid ri_beta={beta!r}: {algo.name} already uses relaxed initialisation; "
                          f"set it with --hp beta=... instead")
    return RelaxedInit(algo, beta, aggregation)


__all__ = ["AGGREGATIONS", "RelaxedInit", "with_relaxed_init"]
