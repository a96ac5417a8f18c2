"""The algorithm interface: an FL method's math and nothing else.

An algorithm is a frozen hyperparameter dataclass (``params_cls``, fields declared with :func:`hp` /
:func:`choice`) plus pure functions over *batched* tensors, in the style of FedJAX's ``client_init /
client_step / client_final`` + server update, with every piece of state handed in and returned:

* ``init_state(x, num_rows) -> (server, client)``: the carried state at t = 0 (zeros by default);
* ``local_lrs(lr, K) -> (lr_0, ..., lr_{K-1})``: the lrs of a round's local steps (constant by default);
* ``client_init(ctx) -> (y, local)``: where local training starts (``ctx.x_clients`` by default; lookahead
  and relaxed-initialisation methods move it) and the round's initial local state;
* ``grad_point(ctx, step, y, local) -> z``: where the engine evaluates step k's minibatch gradient (``y``
  by default; lookahead / perturbed methods move it);
* ``client_step(ctx, step, y, local, g) -> (y, local)``: one local step from the processed gradient ``g``
  (the engine's clipping applied; its weight decay too under ``weight_decay_placement=gradient``, while the
  default ``direction`` adds ``lr_k wd y`` to the step after this hook);
* ``client_final(ctx, start, y, local) -> (uploads, client)``: what each client uploads (averaged over the
  round's clients by the engine) and its new per-client state; ``start`` is where local training started;
* ``server_update(ctx, means) -> (x_{t+1}, server)``: the new global model and server state.

State is declared by name, like a NamedTuple's fields: ``server_state`` (``[R, 2, d]``, carried across
rounds), ``client_state`` (``[R, 2, rows, d]``, one row per physical client, carried across rounds also for
clients that are not sampled) and ``local_state`` (within one round, for the round's clients: created by
``client_init``, handed to and returned from every hook, e.g. a local momentum); names that depend on a
hyperparameter are declared at class level too, with :class:`Given`. The engine carries all three
separately for the two trajectories of each pair and checks every one the same way: a hook returns the
state it holds whole, exactly the declared names (``client_init`` / ``client_step`` / ``client_final``'s
``local`` the local state, ``client_final``'s client and ``server_update``'s server state all of theirs),
so a misspelt or forgotten name is an error, not a stale value.

Shapes: the global model is ``[R, 2, d]`` (pairs x trajectories x parameters), client tensors are
``[R, 2, s, d]``. :class:`RoundContext` is the round's read-only view (``ctx.x_clients`` is ``x_t``
broadcast to the round's clients, ``ctx.lrs`` / ``ctx.lr_sum`` the local lrs and their sum);
:class:`Step` is what one local step sees (its index, lr and minibatch-gradient oracle). Methods that
need more gradients call ``step.grad`` / ``ctx.full_grad_fn`` and treat them with ``ctx.process``; every
call is counted. :class:`Wrapper` composes: it delegates every hook to an inner algorithm and overrides
some (SAM-type ascent, relaxed initialisation). Shared update rules: ``stabkit.algorithms.rules``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, NamedTuple, Optional

if TYPE_CHECKING:  # torch is imported by the engine; listing algorithms (`stabkit algos`) needs no torch
    import torch

from stabkit.algorithms.rules import client_delta, descend, server_step
from stabkit.errors import ConfigError, require


def hp(default, doc: str, low: Optional[float] = None, high: Optional[float] = None,
       low_open: bool = False, high_open: bool = False, optional: bool = False):
    """Declare a numeric hyperparameter: default, one-line meaning and allowed range (the single source of truth)."""
    return dataclasses.field(default=default, metadata=dict(
        doc=doc, low=low, high=high, low_open=low_open, high_open=high_open, optional=optional))


def choice(default: str, doc: str, choices: tuple):
    """Declare a named-variant hyperparameter (e.g. a reading a paper leaves open) with its allowed names."""
    return dataclasses.field(default=default, metadata=dict(doc=doc, choices=tuple(choices)))


@dataclass(frozen=True)
class HParams:
    """Base of every algorithm's hyperparameter dataclass; checks each field against its declared range."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            meta = f.metadata
            if "choices" in meta:
                require(value in meta["choices"], f.name, value, f"one of {', '.join(meta['choices'])}")
                continue
            if value is None and meta.get("optional"):
                continue
            require(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
                    f.name, value, f"a finite number ({_range_text(meta)})")
            low, high = meta.get("low"), meta.get("high")
            ok = ((low is None or (value > low if meta["low_open"] else value >= low))
                  and (high is None or (value < high if meta["high_open"] else value <= high)))
            require(ok, f.name, value, _range_text(meta))

    @classmethod
    def describe(cls) -> list:
        """``[(name, default, range text, doc)]`` for help texts and ``stabkit algos``."""
        return [(f.name, f.default, _range_text(f.metadata), f.metadata.get("doc", ""))
                for f in dataclasses.fields(cls)]


def _range_text(meta) -> str:
    if "choices" in meta:
        return "one of " + "|".join(meta["choices"])
    low, high = meta.get("low"), meta.get("high")
    lo = "(-inf" if low is None else ("(" if meta.get("low_open") else "[") + f"{low:g}"
    hi = "inf)" if high is None else f"{high:g}" + (")" if meta.get("high_open") else "]")
    text = f"in {lo}, {hi}"
    return text + (" or none" if meta.get("optional") else "")


@dataclass(frozen=True)
class RoundContext:
    """What an algorithm sees in one round (all tensors batched over pairs and trajectories); read-only."""

    t: int
    x: torch.Tensor  # [R, 2, d] global model x_t
    x_clients: torch.Tensor  # [R, 2, s, d] x_t broadcast to the round's clients (a view: do not write)
    server: dict  # name -> [R, 2, d]
    client: dict  # name -> [R, 2, s, d], gathered for the round's clients
    lr: float  # client lr of this round (after per-round decay)
    lrs: tuple  # lrs of the K local steps (Algorithm.local_lrs)
    lr_sum: float  # sum(lrs), K * lr for a constant lr: turns a model difference into gradient units
    global_lr: float
    local_steps: int  # K
    num_clients: Any  # M, training population size; [1, 2, 1] tensor (M, M - 1) where run B's federation is
    # smaller (remove-client), so a rule that scales by s / M reads each trajectory's own population
    sampled: int  # s, clients per round
    full_grad_fn: Callable  # z -> raw gradient of each client's full local loss at z (counted)
    process: Callable  # (g, y) -> g as the engine treats every gradient (clipped; + wd y under placement gradient)
    gaussian: Optional[Callable] = None  # purpose -> [R, 2, d] standard normals of the round (stabkit.engine.noise)
    pairs: range = range(0)  # the pairs of this batch (their indices in the run)
    cohort: Any = None  # [R, s] numpy: the logical client ids S_t of the round's slots, per pair
    keys: Any = None  # [R] numpy uint64: a key per pair from the coupled streams, (seed, "host", pair, t), for
    # rules that draw from generators outside stabkit's streams (a Flower strategy's random / numpy.random)


class Step(NamedTuple):
    """One local step: its index k, its lr (``ctx.lrs[k]``) and the minibatch-gradient oracle ``grad``
    (z -> raw loss gradient at z on step k's minibatch, counted; the engine calls it once at ``grad_point``)."""

    k: int
    lr: float
    grad: Callable


@dataclass(frozen=True)
class Given:
    """State names that depend on a hyperparameter, declared at class level like fixed ones:
    ``local_state = Given("anchor", {"start": ("anchor",)})`` (no local state for any other value).
    ``names`` maps a value of hyperparameter ``field`` to its names; ``otherwise`` holds for the rest."""

    field: str
    names: dict
    otherwise: tuple = ()

    def resolve(self, params) -> tuple:
        return tuple(self.names.get(getattr(params, self.field), self.otherwise))


def declared(cls: type, kind: str, params) -> tuple:
    """The names of state ``kind`` (``server_state``, ``client_state``, ``local_state``) that class ``cls``
    itself declares, for hyperparameters ``params``."""
    names = getattr(cls, kind)
    return names.resolve(params) if isinstance(names, Given) else tuple(names)


def zero_state(x: torch.Tensor, num_rows: int, server_names, client_names):
    """``(server, client)`` dicts of zeros: ``[R, 2, d]`` per server name, ``[R, 2, num_rows, d]`` per
    client name."""
    R, _, d = x.shape
    return ({n: x.new_zeros(x.shape) for n in server_names},
            {n: x.new_zeros(R, 2, num_rows, d) for n in client_names})


class Algorithm:
    """Base class: FedAvg's rules, which most methods modify in one or two places."""

    name: ClassVar[str]
    title: ClassVar[str]
    reference: ClassVar[str]
    params_cls: ClassVar[type] = HParams
    server_state: tuple | Given = ()
    client_state: tuple | Given = ()
    local_state: tuple | Given = ()
    needs: ClassVar[frozenset] = frozenset()  # what this class asks of the engine (see :meth:`requires`)

    def __init__(self, params: Optional[HParams] = None):
        self.p = params if params is not None else self.params_cls()
        for kind in STATES:  # an instance's state names: the class's, conditional ones resolved
            setattr(self, kind, declared(type(self), kind, self.p))

    @classmethod
    def from_hp(cls, values: dict) -> "Algorithm":
        """Build from a ``{name: value}`` mapping (unknown names are a ConfigError)."""
        names = [f.name for f in dataclasses.fields(cls.params_cls)]
        for key in values:
            if key not in names:
                allowed = ", ".join(names) if names else "none"
                raise ConfigError(f"invalid hyperparameter {key!r} for {cls.name}: allowed are {allowed}")
        return cls(params=cls.params_cls(**values))

    def init_state(self, x: torch.Tensor, num_rows: int):
        """Initial ``(server, client)`` state: ``server[name]`` is ``[R, 2, d]``, ``client[name]`` is
        ``[R, 2, num_rows, d]`` (one row per physical client). Default: zeros for every declared name."""
        return zero_state(x, num_rows, self.server_state, self.client_state)

    def local_lrs(self, lr: float, K: int) -> tuple:
        """The lrs of the round's K local steps, from the round's client lr (constant unless scheduled)."""
        return (lr,) * K

    def client_init(self, ctx: RoundContext):
        """``(y, local)``: the start of local training (x_t) and the initial local state (zeros per name).
        ``y`` is ``ctx.x_clients`` itself, the broadcast view, not s copies of x_t: the first local step's
        gradient reads the shared model as it is (``FlatModel.grads``), and the built-in hooks return new
        tensors rather than write into ``y`` (torch refuses in-place writes to a broadcast view; a plug-in gets a
        copy, :class:`~stabkit.engine.contract.CheckedAlgorithm`)."""
        y = ctx.x_clients
        return y, {n: y.new_zeros(y.shape) for n in self.local_state}

    def grad_point(self, ctx: RoundContext, step: Step, y: torch.Tensor, local: dict) -> torch.Tensor:
        """Where the engine evaluates the step's minibatch gradient (lookahead / perturbed methods move it)."""
        return y

    def client_step(self, ctx: RoundContext, step: Step, y: torch.Tensor, local: dict, g: torch.Tensor):
        """``(y, local)`` after one local step from the processed gradient ``g``."""
        return descend(y, step.lr, g), local

    def client_final(self, ctx: RoundContext, start: torch.Tensor, y: torch.Tensor, local: dict):
        """``(uploads, new_client_state)``; uploads are averaged over the round's clients."""
        return {"delta": client_delta(ctx, y)}, {}

    def combine(self, ctx: RoundContext, uploads: dict) -> dict:
        """What the server receives from the round's uploads ``[R, 2, s, d]``: their mean over the clients
        (a rule that aggregates otherwise, e.g. a Flower strategy's robust aggregator, keeps them whole)."""
        return {name: u.mean(dim=2) for name, u in uploads.items()}

    def server_update(self, ctx: RoundContext, means: dict):
        """``(x_{t+1}, new_server_state)`` from the combined uploads (:meth:`combine`: the means)."""
        return server_step(ctx, means["delta"]), {}

    def requires(self) -> frozenset:
        """What the algorithm, with every algorithm it wraps, asks of the engine beyond its hooks: the engine
        asks this rather than looking for a class. :data:`CLIENT_SENSITIVITIES`: each round's per-client
        sensitivity of the uploads (a DP run's measured epsilon)."""
        return self.needs

    def dp_params(self):
        """The client-level DP layer's hyperparameters (``clip``, ``noise_multiplier``: what the privacy accountant
        counts) of this algorithm or of an algorithm it wraps; None without one. Asked, like :meth:`requires`,
        rather than looked for by class."""
        return None

    def host_state(self):
        """State the algorithm keeps outside the engine's tensors (Python objects, e.g. Flower strategies),
        for the checkpoint; None when it keeps none. Raises a ConfigError when it cannot be saved."""
        return None

    def load_host_state(self, state) -> None:
        """Restore what :meth:`host_state` returned (on resume)."""


STATES = ("server_state", "client_state", "local_state")
CLIENT_SENSITIVITIES = "client_sensitivities"  # a capability an algorithm may require (Algorithm.requires)


class Wrapper(Algorithm):
    """An algorithm around another one (optax ``chain`` spirit): every hook delegates to ``inner`` and a
    subclass overrides the ones it changes, calling ``super()`` for the inner rule.

    A wrapper class declares only its *own* state names and hyperparameters (``params_cls``); an instance's
    ``server_state`` / ``client_state`` / ``local_state`` are the inner's followed by its own (a clash is an
    error), its ``init_state`` adds zeros for its own names, and local state the inner does not return is kept.
    A named wrapper (a registered algorithm such as FedSAM) declares its inner algorithm (``inner_cls``, or
    ``make_inner`` when it depends on the hyperparameters) and is built like any algorithm, from its
    hyperparameters (``from_hp``); an unnamed one (relaxed initialisation as a run option) is called
    ``<inner>+<tag>``.
    """

    inner_cls: ClassVar[Optional[type]] = None  # a named wrapper's inner algorithm (e.g. FedAvg)
    tag: ClassVar[str] = "wrapped"  # name suffix of an unnamed wrapper
    tag_title: ClassVar[str] = "wrapped"  # title suffix of an unnamed wrapper

    def __init__(self, inner: Optional[Algorithm] = None, params: Optional[HParams] = None):
        super().__init__(params)
        self.inner = inner if inner is not None else self.make_inner()
        for kind in STATES:
            own, theirs = declared(type(self), kind, self.p), tuple(getattr(self.inner, kind))
            clash = set(own) & set(theirs)
            if clash:
                raise ValueError(f"{type(self).__name__} state {sorted(clash)} clashes with {self.inner.name}'s")
            setattr(self, kind, theirs + own)
        if not isinstance(getattr(type(self), "name", None), str):
            self.name = f"{self.inner.name}+{self.tag}"
            self.title = f"{self.inner.title} + {self.tag_title}"
            self.reference = self.inner.reference

    @classmethod
    def around(cls, inner: Algorithm, params: HParams) -> "Wrapper":
        """``cls`` with ``params`` around ``inner``, as a composition puts it (:func:`stabkit.algorithms.compose`);
        a wrapper that cannot go around some algorithms refuses them here, in one line."""
        return cls(inner, params)

    def requires(self) -> frozenset:
        return self.needs | self.inner.requires()

    def dp_params(self):
        return self.inner.dp_params()

    def make_inner(self) -> Algorithm:
        """The wrapped algorithm of a named wrapper when none is given: ``inner_cls()`` by default
        (override to build it from ``self.p``)."""
        if self.inner_cls is None:
            raise TypeError(f"{type(self).__name__} needs an inner algorithm")
        return self.inner_cls()

    def init_state(self, x, num_rows):
        server, client = self.inner.init_state(x, num_rows)
        own_server, own_client = zero_state(x, num_rows, declared(type(self), "server_state", self.p),
                                            declared(type(self), "client_state", self.p))
        return {**server, **own_server}, {**client, **own_client}

    def local_lrs(self, lr, K):
        return self.inner.local_lrs(lr, K)

    def client_init(self, ctx):
        y, local = self.inner.client_init(ctx)
        return y, {**local, **{n: y.new_zeros(y.shape) for n in declared(type(self), "local_state", self.p)}}

    def grad_point(self, ctx, step, y, local):
        return self.inner.grad_point(ctx, step, y, local)

    def client_step(self, ctx, step, y, local, g):
        y, inner_local = self.inner.client_step(ctx, step, y, local, g)
        return y, {**local, **inner_local}

    def client_final(self, ctx, start, y, local):
        return self.inner.client_final(ctx, start, y, local)

    def combine(self, ctx, uploads):
        return self.inner.combine(ctx, uploads)

    def server_update(self, ctx, means):
        return self.inner.server_update(ctx, means)

    def host_state(self):
        return self.inner.host_state()

    def load_host_state(self, state):
        self.inner.load_host_state(state)
