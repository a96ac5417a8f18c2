"""The server-optimizer slot: optax-style ``(init, update)`` transforms of the mean client upload, as FedJAX's
``server_optimizer`` (Reddi et al.'s FedOpt family: FedAvgM, FedAdam, FedYogi, FedAdagrad are each one).

A :class:`Transform` is a pair of pure functions over ``[R, 2, d]`` tensors:

* ``init(x) -> state``: the optimizer state at t = 0, a NamedTuple whose fields are the server-state names;
* ``update(delta, state) -> (direction, state)``: from the mean upload ``delta = mean_i (y_i - x_t)`` the
  direction of the server step ``x_{t+1} = x_t + eta_g direction`` and the new state.

:class:`ServerOpt` is the :class:`~stabkit.algorithms.base.Wrapper` that puts a transform in any algorithm's
server: the inner algorithm's clients and its own server bookkeeping run unchanged, and its server step is taken
along the transform's direction instead of the mean upload (``AdamServer(Scaffold(), FedAdamParams())`` is
SCAFFOLD with an Adam server, named ``scaffold+adam``). A named subclass with ``inner_cls = FedAvg`` is a FedOpt
method (FedAdam, the FOSM family). A subclass declares the transform's state class (``state``; its fields become
the server state) and builds the transform from its hyperparameters (``transform``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, ClassVar, NamedTuple

if TYPE_CHECKING:  # torch is imported by the engine; listing algorithms (`stabkit algos`) needs no torch
    import torch

from stabkit.algorithms.base import Wrapper
from stabkit.algorithms.fedavg import FedAvg


class Transform(NamedTuple):
    """An optax-style gradient transformation of the mean upload (see the module docstring)."""

    init: Callable  # x [R, 2, d] -> state (NamedTuple of [R, 2, d] tensors)
    update: Callable  # (delta, state) -> (direction, state)


class AdamState(NamedTuple):
    m: torch.Tensor  # first moment
    v: torch.Tensor  # second moment


class MomentumState(NamedTuple):
    m: torch.Tensor  # momentum buffer (Libra's sign: along x_t - mean_i y_i)


def adam(beta1: float, beta2: float, tau: float, v_init: str = "tau2") -> Transform:
    """Reddi et al.'s FedAdam server: ``m = beta1 m + (1 - beta1) delta``, ``v = beta2 v + (1 - beta2) delta^2``
    (elementwise, no bias correction), direction ``m / (sqrt(v) + tau)``; ``v_{-1} = tau^2`` (``v_init="tau2"``)
    or 0."""
    def init(x):
        zeros = x.new_zeros(x.shape)
        return AdamState(x.new_zeros(x.shape), zeros + tau ** 2 if v_init == "tau2" else zeros)

    def update(delta, s: AdamState):
        m = beta1 * s.m + (1 - beta1) * delta
        v = beta2 * s.v + (1 - beta2) * delta * delta
        return m / (v.sqrt() + tau), AdamState(m, v)

    return Transform(init, update)


def momentum(beta: float, nu: float) -> Transform:
    """Libra's FOSM server momentum: ``m = beta m + nu d`` with ``d = -delta``, direction ``-m``
    (so ``x_{t+1} = x_t - eta_g m``); ``m_{-1} = 0``."""
    def init(x):
        return MomentumState(x.new_zeros(x.shape))

    def update(delta, s: MomentumState):
        m = beta * s.m + nu * -delta  # Libra's d^t = x^t - mean_i x_i^{t,K}
        return -m, MomentumState(m)

    return Transform(init, update)


class ServerOpt(Wrapper):
    """``inner`` with its server step taken along a :class:`Transform` of the mean upload (optax ``chain``
    spirit). A subclass sets ``state`` (the transform's state NamedTuple) and ``transform()``."""

    inner_cls: ClassVar[type] = FedAvg
    state: ClassVar[type] = None  # the transform's state NamedTuple; its fields are the server state
    tag, tag_title = "server_opt", "server optimizer"

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "state" in vars(cls):
            cls.server_state = tuple(cls.state._fields)

    def __init__(self, inner=None, params=None):
        super().__init__(inner, params)
        self.opt = self.transform()

    def transform(self) -> Transform:
        """The transform, built from ``self.p``."""
        raise NotImplementedError

    def init_state(self, x, num_rows):
        server, client = self.inner.init_state(x, num_rows)
        return {**server, **self.opt.init(x)._asdict()}, client

    def server_update(self, ctx, means):
        state = self.state(*(ctx.server[n] for n in self.state._fields))
        direction, state = self.opt.update(means["delta"], state)
        x, inner_server = self.inner.server_update(ctx, {**means, "delta": direction})
        return x, {**inner_server, **state._asdict()}


__all__ = ["AdamState", "MomentumState", "ServerOpt", "Transform", "adam", "momentum"]
