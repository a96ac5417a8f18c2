"""Relaxed initialisation (RI, FedInit Algorithm 1 line 6, and its Table 6) for any algorithm.

Each client starts local training from ``x_t + beta (x_t - last_i)``, where ``last_i`` is its final local
model from its previous participation (``x_0`` before the first one), and remembers its new final local
model. Everything else in the wrapped method is unchanged ("irrelevant to the local optimizer").
Aggregation variants (paper vs its authors' code): ``model_avg`` (paper line 16: uploads are measured from x_t, so
with eta = 1 the server takes the mean of the final local models) and ``delta_from_init`` (reference code:
uploads are measured from the RI start point, which also applies the RI correction at the server).
beta = 0 is the wrapped method bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

from stabkit.algorithms.base import HParams, Wrapper, choice, hp
from stabkit.errors import ConfigError

AGGREGATIONS = ("model_avg", "delta_from_init")


@dataclass(frozen=True)
class RIParams(HParams):
    beta: float = hp(0.1, "relaxed-initialisation coefficient beta (authors' code default 0.1; "
                     "negative moves the start towards the last local model)")
    aggregation: str = choice("model_avg", "server aggregation: model_avg = paper line 16 "
                              "(uploads from w^t); delta_from_init = reference code (uploads from the RI point)",
                              AGGREGATIONS)


class RelaxedInit(Wrapper):
    """``inner`` with relaxed initialisation (hyperparameters :class:`RIParams`); named ``<inner>+ri``."""

    params_cls = RIParams
    client_state = ("ri_last",)
    tag, tag_title = "ri", "RI"

    @classmethod
    def around(cls, inner, params):
        """Refused around an algorithm that clips its uploads (DP: RI's ``delta_from_init`` would change them
        after they are clipped; the composition puts DP around RI instead, :data:`stabkit.algorithms.wrap.WRAPPERS`)
        or already relaxes its start (FedInit takes beta as a hyperparameter)."""
        if inner.dp_params() is not None:
            raise ConfigError(f"invalid ri_beta={params.beta!r} with algo {inner.name}: relaxed initialisation would "
                              f"act on the clipped uploads; use the algorithm without DP and --wrap dp:... around it")
        if isinstance(inner, RelaxedInit):
            raise ConfigError(f"invalid ri_beta={params.beta!r}: {inner.name} already uses relaxed initialisation; "
                              f"set it with --hp beta=... instead")
        return cls(inner, params)

    def init_state(self, x, num_rows):
        server, client = super().init_state(x, num_rows)
        client["ri_last"] = x[:, :, None, :].expand(-1, -1, num_rows, -1).clone()
        return server, client

    def client_init(self, ctx):
        y, local = super().client_init(ctx)
        return y + self.p.beta * (ctx.x_clients - ctx.client["ri_last"]), local

    def client_final(self, ctx, start, y, local):
        uploads, new_client = super().client_final(ctx, start, y, local)
        if self.p.aggregation == "delta_from_init":
            uploads = {**uploads, "delta": uploads["delta"] - (start - ctx.x_clients)}
        return uploads, {**new_client, "ri_last": y}


__all__ = ["AGGREGATIONS", "RIParams", "RelaxedInit"]
