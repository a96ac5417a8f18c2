"""Plug-ins for tests/test_plugins.py, named by import path ``tests.plugin_fixtures:NAME``: a user task with
six training clients, model factories (one raising), bounds, and two deliberately broken algorithms."""
import numpy as np
import torch
from torch import nn

from stabkit.algorithms import Algorithm
from stabkit.analysis.bounds import Bound, iterate
from stabkit.tasks import Task


def six_clients(opts) -> Task:
    """A user's task: 6 training + 2 held-out clients of a 3-class problem, whatever opts.clients says."""
    rng = np.random.default_rng(opts.seed)
    w = rng.normal(size=(5, 3))
    xs = [rng.normal(loc=i / 4, size=(24, 5)).astype(np.float32) for i in range(8)]
    ys = [np.argmax(x @ w, axis=1).astype(np.int64) for x in xs]
    return Task(name="six", kind="classification", num_classes=3, input_shape=(5,),
                train_x=[x[:20] for x in xs], train_y=[y[:20] for y in ys], val_x=[x[20:] for x in xs],
                val_y=[y[20:] for y in ys], test_x=np.concatenate(xs)[::4], test_y=np.concatenate(ys)[::4],
                num_train_clients=6, default_model="mlp")


def not_a_task(opts):
    return {"x": [1, 2, 3]}


def raising_factory(task):
    raise RuntimeError("no GPU kernels for this layer")


def plain_bound(st):
    """An undecorated bound an entry point registers for the algorithm named like the entry point."""
    return Bound("plain", st.algo, "disc", "test", "tests", iterate(1.0, np.full(st.T, 1e3)))


def two_argument_bound(st, extra):
    return plain_bound(st)


class Asymmetric(Algorithm):
    """Breaks the null pair: trajectory B's server step moves by an extra 1e-3."""

    name = "asymmetric"

    def server_update(self, ctx, means):
        x, state = super().server_update(ctx, means)
        return x + 1e-3 * torch.arange(2, dtype=x.dtype)[None, :, None], state


class Unseeded(Algorithm):
    """Not deterministic: noise from the global torch generator, which no seed of the run controls."""

    name = "unseeded"

    def server_update(self, ctx, means):
        x, state = super().server_update(ctx, means)
        return x + 1e-3 * torch.randn(x.shape[-1], dtype=x.dtype), state


class Tanh(nn.Module):
    """A user module the hand-written fast path does not know."""

    def __init__(self, d, classes):
        super().__init__()
        self.a, self.b = nn.Linear(d, 16), nn.Linear(16, classes)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x.flatten(1))))


def tanh_net(task):
    return Tanh(int(np.prod(task.input_shape)), task.num_classes)


def missing_hp_bound(st):
    """Reads a hyperparameter FedAvg does not have (must be named, not reported as 'unavailable')."""
    return plain_bound(st) if st.hp["beta"] else []


class InPlaceStep(Algorithm):
    """FedAvg with its local step written in place, as a user may write it (into the ``y`` the default
    ``client_init`` starts from)."""
    name = "in_place_step"

    def client_step(self, ctx, step, y, local, g):
        return y.add_(g, alpha=-step.lr), local


# Misbehaving plug-ins (tests/cli/test_bad_inputs.py): each must be one line naming it and what is wrong.
class InitRaises(Algorithm):
    name = "init_raises"

    def __init__(self, params=None):
        raise RuntimeError("no config file found")


class StepReturnsTensor(Algorithm):
    name = "step_returns_tensor"

    def client_step(self, ctx, step, y, local, g):
        return y - step.lr * g


class StepWrongShape(Algorithm):
    name = "step_wrong_shape"

    def client_step(self, ctx, step, y, local, g):
        return (y - step.lr * g)[..., :3], local


class UndeclaredClientState(Algorithm):
    name = "undeclared_client_state"
    client_state = ("c",)

    def client_final(self, ctx, start, y, local):
        return {"delta": ctx.x_clients - y}, {"other": y}


class ServerStateCut(Algorithm):
    """Declares two server-state names and returns one: every hook must return its state whole."""
    name = "server_state_cut"
    server_state = ("m", "v")

    def server_update(self, ctx, means):
        x, _ = super().server_update(ctx, means)
        return x, {"m": ctx.server["m"]}


class UndeclaredLocalState(Algorithm):
    name = "undeclared_local_state"

    def client_init(self, ctx):
        y = ctx.x_clients.clone()
        return y, {"m": torch.zeros_like(y)}


class ServerDropsPairs(Algorithm):
    name = "server_drops_pairs"

    def server_update(self, ctx, means):
        return ctx.x[0], {}


class UploadsNotADict(Algorithm):
    name = "uploads_not_a_dict"

    def client_final(self, ctx, start, y, local):
        return ctx.x_clients - y, {}


class HookRaises(Algorithm):
    name = "hook_raises"

    def server_update(self, ctx, means):
        return ctx.x - means["momentum"], {}


def two_layer_regressor(task):
    """A non-linear model on a regression task (the quadratic's closed-form constants are not its)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(task.input_shape)), 4), nn.Tanh(), nn.Linear(4, 1))


def three_outputs(task):
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(task.input_shape)), 3))


def wrong_width(task):
    return nn.Sequential(nn.Flatten(), nn.Linear(10, task.num_classes))


def with_batchnorm(task):
    d = int(np.prod(task.input_shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(d, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, task.num_classes))


def with_dropout(task):
    d = int(np.prod(task.input_shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(d, 16), nn.Dropout(0.5), nn.ReLU(), nn.Linear(16, task.num_classes))


def _six_changed(opts, **changes) -> Task:
    import dataclasses

    task = six_clients(opts)
    return dataclasses.replace(task, **{k: v(task) for k, v in changes.items()})


def six_with_nan(opts):
    def train_x(task):
        xs = [x.copy() for x in task.train_x]
        xs[2][3, 1] = xs[4][0, 0] = np.nan
        return xs
    return _six_changed(opts, train_x=train_x)


def six_without_test(opts):
    return _six_changed(opts, test_x=lambda t: t.test_x[:0], test_y=lambda t: t.test_y[:0])


def six_with_text(opts):
    return _six_changed(opts, train_x=lambda t: [np.full(x.shape, "a") for x in t.train_x])


class RaisesInRound5(Algorithm):
    """Works for four rounds, then its server_update raises (a plug-in bug that try_round's round 1 misses)."""
    name = "raises_in_round_5"

    def server_update(self, ctx, means):
        if ctx.t == 4:
            raise RuntimeError("the plug-in's own bug in round 5")
        return super().server_update(ctx, means)


class WrongTypeFromRound2(Algorithm):
    """Its server_update returns a list instead of (x, state) from round 2 on."""
    name = "wrong_type_from_round_2"

    def server_update(self, ctx, means):
        x, state = super().server_update(ctx, means)
        return (x, state) if ctx.t == 0 else [x, state]


class PromotesToFloat64(Algorithm):
    """Keeps a server state it promotes to float64 (the run computes in float32)."""
    name = "promotes_to_float64"
    server_state = ("m",)

    def server_update(self, ctx, means):
        x, _ = super().server_update(ctx, means)
        return x, {"m": ctx.server["m"].double() * 0.9 + (ctx.x - x).double()}
