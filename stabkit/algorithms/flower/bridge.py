"""The bridge: a Flower strategy as a stabkit :class:`~stabkit.algorithms.base.Algorithm`.

Each trajectory of each pair holds its own copy of the strategy (built fresh at round 0, carried through the
rounds: FedAdam's moments, FedAvgM's momentum and the DP wrappers' clipping norms are state). A round (the
Message API's calls are named; a legacy strategy's ``configure_fit`` / ``aggregate_fit`` take their place,
:mod:`.legacy`):

* ``client_init``: every copy's ``configure_train`` on its trajectory's global model and the round's cohort
  (node id = logical client id + 2), the messages sorted by node id; the config they send is read once per
  round: ``proximal-mu`` becomes FedProx's proximal term, ``mu/2 ||y - x_t||^2`` (squared, as in the FedProx
  paper: the step adds ``mu (y - x_t)``), ``clipping_norm`` is honoured by Flower's own client mod, and any
  other key is reported once on stderr, not silently ignored;
* the local steps: FedAvg's local SGD in the batched engine (plus the proximal term);
* ``combine`` keeps every client's final model (no mean: the strategy aggregates);
* ``server_update``: fresh replies for each trajectory (the clients' models, ``num-examples`` = K for every
  client: all train K steps of the same batch size, so Flower's example-weighted mean is stabkit's plain
  mean), ``aggregate_train``, its arrays the new global model; None keeps the model and is reported as a
  skipped round.

Flower's ``random`` / ``numpy.random`` draws are seeded from ``ctx.keys`` (keyed on seed, pair and round, the
same for both trajectories), so a null pair stays exactly 0 and DP noise is coupled. A strategy that draws
from anything else (an unseeded generator of its own, ``os.urandom``) would make the pair drift without a
word, so every round, for every pair whose two trajectories handed their strategy the same bits (the same
global model and the same replies: always in the null pair, and in a perturbed pair until the perturbation
first reaches the cohort), the two aggregates must be the same bits; a failure names the round. The check
costs two comparisons of arrays per pair, no extra call. A failure after round 1 (the strategy raising,
returning the wrong arrays, or this check) stops the run as a failing plug-in does: ``summary.json`` with
status ``failed``, the rounds before it kept. The strategy's server rule
replaces stabkit's server step: ``--global-lr`` must be 1 (a server learning rate is the strategy's own
hyperparameter).
"""
from __future__ import annotations

import dataclasses
import inspect
import pickle
import sys
from typing import ClassVar

import numpy as np

import stabkit.algorithms.flower.inprocess as fl
import stabkit.algorithms.flower.legacy as legacy
from stabkit.algorithms.base import Algorithm
from stabkit.algorithms.flower.params import SAMPLING, params_class
from stabkit.algorithms.flower.strategies import PREFIX, is_legacy, strategy_class
from stabkit.algorithms.rules import descend
from stabkit.errors import ConfigError, PluginFailed
from stabkit.plugins import describe_error
from stabkit.trajectories import LABELS

# config keys the local rule acts on (or may ignore); proximal_mu: a legacy FedProx's
HONOURED = ("server-round", "proximal-mu", "proximal_mu", "clipping_norm")


class FlowerStrategy(Algorithm):
    """Base of the generated bridge classes (one per ``flwr:`` name; :func:`bridge_class`)."""

    strategy_cls: ClassVar[type]
    protocol: ClassVar = fl  # the module that drives the strategy's API: inprocess (Message API) or legacy

    def __init__(self, params=None):
        super().__init__(params)
        self.copies: dict = {}  # (pair, trajectory) -> the strategy instance
        self._pending: dict = {}  # (pair, trajectory) -> the round's sorted train messages
        self._mu = 0.0
        self._reported: set = set()
        self.skipped: list = []  # (round, pair, trajectory) whose aggregate_train returned no arrays

    def make_strategy(self, s: int, x0: np.ndarray):
        """A fresh strategy built from the hyperparameters, sampling exactly ``s`` clients per round (a legacy
        strategy's ``initial_parameters``: the pair's x_0)."""
        return _build(self.strategy_cls, self.name, self.p, s, x0)

    def _fail(self, what: str, t: int, pair: int, j: int, error: Exception) -> PluginFailed:
        return PluginFailed(f"{self.name}: {what} raised {describe_error(error)} at round {t + 1} (pair {pair}, "
                            f"trajectory {LABELS[j]})")

    def client_init(self, ctx):
        if ctx.global_lr != 1.0:
            raise ConfigError(f"invalid global_lr={ctx.global_lr!r} for {self.name}: 1 (the strategy's server "
                              "rule replaces stabkit's step; give a server learning rate as its --hp)")
        if ctx.t == 0:
            self.copies = {key: v for key, v in self.copies.items() if key[0] not in ctx.pairs}
        x = ctx.x.detach().cpu().numpy()
        mus = np.zeros((len(ctx.pairs), 2))
        for i, pair in enumerate(ctx.pairs):
            nodes = ctx.cohort[i] + fl.NODE_OFFSET
            for j in (0, 1):
                if (pair, j) not in self.copies:
                    self.copies[pair, j] = self.make_strategy(ctx.sampled, x[i, j])
                try:
                    with fl.flower_calls(int(ctx.keys[i]), 0):
                        messages = self.protocol.configure(self.copies[pair, j], ctx.t + 1, {fl.ARRAY: x[i, j]}, nodes)
                except ConfigError:
                    raise
                except Exception as e:
                    raise self._fail(self.protocol.CONFIGURE, ctx.t, pair, j, e) from None
                self._check_cohort(messages, nodes, ctx.t)
                self._pending[pair, j] = messages
                mus[i, j] = self._read_config(self.protocol.config_of(messages[0]), self.copies[pair, j])
        import torch

        self._mu = float(mus.flat[0]) if (mus == mus.flat[0]).all() else \
            torch.as_tensor(mus, dtype=ctx.x.dtype, device=ctx.x.device)[:, :, None, None]
        return super().client_init(ctx)

    def _check_cohort(self, messages, nodes, t: int) -> None:
        got = [self.protocol.node_of(m) for m in messages]
        if got != sorted(int(n) for n in nodes):
            raise PluginFailed(f"{self.name}: {self.protocol.CONFIGURE} at round {t + 1} addressed nodes {got}, not the "
                              f"sampled cohort {sorted(int(n) for n in nodes)} (it must train every node the grid "
                              "lists when its sampling arguments are set by the bridge)")

    def _read_config(self, config: dict, strategy) -> float:
        """The proximal weight ``config`` sends (0 if none); every key the local rule cannot honour is reported
        once."""
        for key, value in config.items():
            honoured = key in HONOURED and (key != "clipping_norm" or self.protocol.client_mod(strategy) is not None)
            if not honoured and key not in self._reported:
                self._reported.add(key)
                print(f"warning: {self.name} sends config {key!r}={value!r}, which stabkit's local rule does not "
                      "honour (it trains with --lr, --local-steps and --batch-size); ignored", file=sys.stderr)
        return float(config.get("proximal-mu", config.get("proximal_mu", 0.0)))

    def client_step(self, ctx, step, y, local, g):
        mu = self._mu
        if isinstance(mu, float) and mu == 0.0:
            return descend(y, step.lr, g), local
        return descend(y, step.lr, g + mu * (y - ctx.x_clients)), local

    def client_final(self, ctx, start, y, local):
        return {"y": y}, {}

    def combine(self, ctx, uploads):
        return uploads

    def server_update(self, ctx, means):
        import torch

        y = means["y"].detach().cpu().numpy()
        x_np = ctx.x.detach().cpu().numpy()
        x_new = x_np.copy()  # written row by row in numpy, one tensor at the end (a torch row write costs more)
        for i, pair in enumerate(ctx.pairs):
            slot = {int(n) + fl.NODE_OFFSET: k for k, n in enumerate(ctx.cohort[i])}
            for j in (0, 1):
                strategy = self.copies[pair, j]
                proto, mod = self.protocol, self.protocol.client_mod(strategy)
                messages = self._pending.pop((pair, j))
                try:
                    with fl.flower_calls(int(ctx.keys[i]), 1):
                        replies = [proto.reply(m, {fl.ARRAY: y[i, j, slot[proto.node_of(m)]]}, ctx.local_steps, mod)
                                   for m in messages]
                        arrays = proto.aggregate(strategy, ctx.t + 1, replies)
                except Exception as e:
                    raise self._fail(proto.AGGREGATE, ctx.t, pair, j, e) from None
                if arrays is None:
                    self._skip(ctx.t, pair, j)
                    continue
                x = fl.unpack(arrays, {fl.ARRAY: x_np[i, j]})
                if isinstance(x, str):
                    raise PluginFailed(f"{self.name}: {proto.AGGREGATE} returned {x} at round {ctx.t + 1}")
                x_new[i, j] = x[fl.ARRAY]
            self._check_deterministic(ctx.t, pair, x_np[i], y[i], x_new[i])
        return torch.from_numpy(x_new).to(ctx.x.device), {}

    def _check_deterministic(self, t: int, pair: int, x, y, x_new) -> None:
        """Both trajectories handed the strategy the same bits (model ``x[j]``, replies ``y[j]``): their new
        models ``x_new[j]`` must be the same bits (module docstring)."""
        same_in = x[0].tobytes() == x[1].tobytes() and y[0].tobytes() == y[1].tobytes()
        if same_in and x_new[0].tobytes() != x_new[1].tobytes():
            raise PluginFailed(f"{self.name}: not deterministic at round {t + 1} (pair {pair}): its two copies, "
                               "handed the same model and the same replies with Flower's random and numpy.random "
                               "seeded alike, returned different aggregates (a generator of its own or "
                               "os.urandom?), so even the null pair would drift")

    def _skip(self, t: int, pair: int, j: int) -> None:
        self.skipped.append((t + 1, pair, LABELS[j]))
        print(f"warning: {self.name} aggregated nothing at round {t + 1} (pair {pair}, trajectory "
              f"{LABELS[j]}): the model is kept (a skipped round)", file=sys.stderr)

    def host_state(self):
        """The strategies, pickled into a uint8 tensor (a checkpoint holds tensors only)."""
        import torch

        try:
            data = pickle.dumps(dict(sorted(self.copies.items())))
        except Exception as e:
            raise ConfigError(f"{self.name} cannot be checkpointed: pickling its strategy raised "
                              f"{describe_error(e)}; run with --checkpoint-every 0") from None
        return torch.frombuffer(bytearray(data), dtype=torch.uint8)

    def load_host_state(self, state) -> None:
        self.copies = pickle.loads(state.cpu().numpy().tobytes())


def _build(cls: type, label: str, params, s: int, x0: np.ndarray):
    """``cls(**params, sampling arguments for s clients)``; an inner strategy named in ``params`` (a wrapper's
    ``strategy``) is built the same way, with its defaults; ``initial_parameters`` (legacy FedOpt) is ``x0``."""
    signature = inspect.signature(cls).parameters
    kwargs = {name: make(s) for name, make in SAMPLING.items() if name in signature}
    if "initial_parameters" in signature:
        kwargs["initial_parameters"] = legacy.parameters({fl.ARRAY: x0})
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if f.metadata["kind"] == "strategy" and value is not None:
            inner = strategy_class(label, value)
            value = _build(inner, label, params_class(inner, label)(), s, x0)
        kwargs[f.name] = value
    try:
        strategy = cls(**kwargs)
    except Exception as e:
        raise ConfigError(f"invalid algo={label!r}: {cls.__name__}({', '.join(kwargs)}) raised "
                          f"{describe_error(e)}") from None
    _check_cohort_size(strategy, label, s)
    return strategy


# robust aggregators: how many clients per round they need against f malicious ones (Blanchard et al. 2017:
# n > 2f + 2 for Krum and MultiKrum; El Mhamdi et al. 2018: n >= 4f + 3 for Bulyan). With fewer, Krum scores
# every reply alike and picks the first (D_t = 0 in every round), Bulyan skips every round.
ROBUST = {"Bulyan": (4, "4f + 3"), "MultiKrum": (2, "2f + 3"), "Krum": (2, "2f + 3")}


def _check_cohort_size(strategy, label: str, s: int) -> None:
    """Refuse a robust aggregator that cannot aggregate s clients."""
    name = next((c.__name__ for c in type(strategy).__mro__ if c.__module__.startswith("flwr.")
                 and c.__name__ in ROBUST), None)
    if name is None:
        return
    f = getattr(strategy, "num_malicious_nodes", getattr(strategy, "num_malicious_clients", 0))
    factor, text = ROBUST[name]
    if s < factor * f + 3:
        raise ConfigError(f"invalid algo={label!r}: {name} with num_malicious_nodes={f} needs at least {text} = "
                          f"{factor * f + 3} clients per round, got {s}")


def bridge_class(name: str) -> type:
    """The algorithm class of ``--algo name`` (``flwr:NAME`` or ``flwr:package.module:Class``)."""
    cls = strategy_class(name, name[len(PREFIX):])
    return type(f"Flower{cls.__name__}", (FlowerStrategy,), dict(
        name=name, title=f"{cls.__name__} (Flower)", params_cls=params_class(cls, name), strategy_cls=cls,
        protocol=legacy if is_legacy(cls) else fl,
        reference=f"Flower strategy {cls.__module__}.{cls.__qualname__}, driven in-process by stabkit"))
