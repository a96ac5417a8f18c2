"""``stabkit pair --flwr-app package.module:NAME``: a whole Flower app, paired and coupled.

The entry point is a function ``NAME()`` returning a dict with

* ``client_app``: the app's ``flwr.clientapp.ClientApp`` (its own local training, unchanged);
* ``strategy``: the Message-API strategy its ``ServerApp`` uses (copied once per trajectory of every pair;
  the runner sets its sampling attributes so that it trains exactly the cohort stabkit sampled);
* ``arrays``: the initial ``ArrayRecord`` its ``ServerApp`` starts from;
* ``partitions``: how many training partitions (nodes) the app's data loader has;
* ``heldout`` (optional, default 0): further partitions ``partitions ... partitions + heldout - 1`` it can
  load, for client perturbation.

Every round, per pair: stabkit's coupled client sample S_t (the same in both trajectories), each trajectory's
strategy copy configures the round (:mod:`stabkit.algorithms.flower.inprocess`), every sampled node's
ClientApp is called in a plain loop (:mod:`stabkit.run.flwr_clients`: 2 x pairs x s calls per round, each
with the RNGs seeded from (seed, pair, round, node)), and ``aggregate_train`` gives the new arrays.
``--perturb client`` gives one node per pair (drawn from stabkit's streams) a held-out partition in trajectory B;
``--perturb remove-client`` runs B without one node (drawn likewise): B's cohort is A's, the node's slot taken by
the next node of the same random order when A samples it (``stabkit.engine.perturbation``);
``--perturb none`` is the null pair (D_t exactly 0 for a deterministic app). ``--perturb sample`` and
``remove-sample`` are refused: stabkit cannot see inside the app's data loading.

What a deterministic app owes is checked every round, at no extra call: where both trajectories of a pair send
a node the same bits (the same model, the same partition: always in the null pair, and in a client-perturbed
pair until the perturbation first reaches the model), the two replies must be the same bits (else the node is
named); where both trajectories hand the strategy the same bits (the same model and replies), the two
aggregates must be too. A client nondeterministic from round 3 on is caught at round 3, not left to drift.

:class:`AppRun` is what one round of an app is (``advance``): the round loop (``stabkit.run.loop``) runs it,
and :mod:`stabkit.run.flwr_files` writes its directory (with a checkpoint after every round, so ``stabkit
pair --resume`` continues it). A call refused in round 1 is a ``ConfigError`` (nothing is written yet); after
round 1 it fails the run (``PluginFailed``), the rounds before kept.
"""
from __future__ import annotations

import copy
import pickle
from dataclasses import dataclass
from typing import Optional

import numpy as np

from stabkit import plugins
from stabkit.algorithms.flower import inprocess as fl
from stabkit.algorithms.flower.params import SAMPLING
from stabkit.engine.perturbation import removed_cohort
from stabkit.engine.rng import hash_keys, randint
from stabkit.engine.sampling import client_order
from stabkit.errors import ConfigError, PluginFailed, require
from stabkit.extras import require_extra
from stabkit.run import flwr_clients as fc
from stabkit.run.loop import RunState
from stabkit.trajectories import LABELS

KEYS = ("client_app", "strategy", "arrays", "partitions")


def load_app(spec: str) -> dict:
    """The app the entry point ``spec`` returns, checked (one ConfigError line per problem)."""
    require_extra("flower")
    from flwr.app import ArrayRecord
    from flwr.clientapp import ClientApp
    from flwr.serverapp.strategy import Strategy

    if not plugins.is_import_path(spec):
        raise ConfigError(f"invalid flwr_app={spec!r}: an import path package.module:function")
    app = plugins.call("flwr_app", spec, plugins.load("flwr_app", spec))
    where = f"invalid flwr_app={spec!r}"
    require(isinstance(app, dict) and set(KEYS) <= set(app), "flwr_app", spec,
            f"a function returning a dict with {', '.join(KEYS)} (and optionally heldout)")
    checks = (("client_app", ClientApp), ("strategy", Strategy), ("arrays", ArrayRecord))
    for key, cls in checks:
        if not isinstance(app[key], cls):
            raise ConfigError(f"{where}: its {key} is a {type(app[key]).__name__}, expected {cls.__name__}")
    for key in ("partitions", "heldout"):
        value, least = app.get(key, 0), 1 if key == "partitions" else 0
        if not (isinstance(value, int) and value >= least):
            raise ConfigError(f"{where}: its {key} is {value!r}, expected an integer >= {least}")
    return {"heldout": 0, **app}


@dataclass(frozen=True)
class AppSettings:
    """What an app run reads of its configuration: the six options it takes (a ``RunConfig`` has them too)."""

    seed: int
    pairs: int
    rounds: int
    perturb: str
    clients_per_round: Optional[int] = None
    participation: float = 1.0

    @classmethod
    def of(cls, cfg) -> "AppSettings":
        return cls(cfg.seed, cfg.pairs, cfg.rounds, cfg.perturb, cfg.clients_per_round, cfg.participation)


def cohort_size(app: dict, cfg) -> int:
    """s: ``--clients-per-round``, else ``--participation`` of the app's partitions (at least 1)."""
    if cfg.clients_per_round is not None:
        return cfg.clients_per_round
    return max(1, int(round(cfg.participation * app["partitions"])))


def check_settings(spec: str, app: dict, cfg) -> None:
    """What this run asks of the app: a cohort it has, and a perturbation it can take."""
    s = cohort_size(app, cfg)
    require(s <= app["partitions"], "clients_per_round", s, f"at most the app's {app['partitions']} partitions")
    if cfg.perturb in ("sample", "remove-sample"):
        raise ConfigError(f"invalid perturb={cfg.perturb!r} with --flwr-app: none, client or remove-client "
                          "(stabkit cannot see inside the app's data loading to change one sample)")
    require(cfg.perturb in ("none", "client", "remove-client"), "perturb", cfg.perturb,
            "none, client or remove-client with --flwr-app")
    if cfg.perturb == "remove-client":
        require(s <= app["partitions"] - 1, "clients_per_round", s, f"at most {app['partitions'] - 1} with "
                f"--perturb remove-client: run B's federation has the app's {app['partitions']} partitions but one")
    if cfg.perturb == "client" and app["heldout"] < 1:
        raise ConfigError(f"invalid flwr_app={spec!r}: --perturb client needs a held-out partition (its entry "
                          "point's heldout is 0)")


def _sampling_set(strategy, s: int):
    """A copy of ``strategy`` with its sampling attributes set to train exactly the s nodes of the cohort."""
    strategy = copy.deepcopy(strategy)
    for name, make in SAMPLING.items():
        if hasattr(strategy, name):
            setattr(strategy, name, make(s))
    return strategy


class AppRun:
    """The paired run of a Flower app: per pair and trajectory a strategy copy, the arrays and the nodes'
    contexts, advanced one round at a time by the round loop; ``cfg``: its :class:`AppSettings` (or a
    ``RunConfig``). Its rows are column dicts, one per round (``take``); ``state.record`` holds the
    discrepancies of the last round that did not diverge."""

    def __init__(self, spec: str, app: dict, cfg):
        self.spec, self.app, self.cfg = spec, app, AppSettings.of(cfg)
        self.s, self.N, R = cohort_size(app, cfg), app["partitions"], cfg.pairs
        start = {k: a.numpy() for k, a in app["arrays"].items()}
        self.strategies = {(p, j): _sampling_set(app["strategy"], self.s) for p in range(R) for j in (0, 1)}
        self.arrays = {(p, j): dict(start) for p in range(R) for j in (0, 1)}
        self.contexts: dict = {}
        self.perturbed = randint(cfg.seed, "flwr-app-client", self.N, np.arange(R))
        self.replacement = self.N + randint(cfg.seed, "flwr-app-heldout", max(app["heldout"], 1), np.arange(R))
        self.rows: list = []
        self.client_calls = 0
        self.skipped = 0  # rows (pair rounds) whose strategy skipped the round, over the kept rounds
        self.state = RunState(cfg.rounds)

    def partition(self, pair: int, j: int, node: int) -> int:
        """The partition trajectory j of ``pair`` trains on at logical node ``node`` (client perturbation:
        trajectory B's perturbed node loads a held-out partition)."""
        if self.cfg.perturb == "client" and j == 1 and node == self.perturbed[pair]:
            return int(self.replacement[pair])
        return node

    def _context(self, pair: int, j: int, node: int):
        key = (pair, j, node)
        if key not in self.contexts:
            self.contexts[key] = fc.node_context(node + fl.NODE_OFFSET, self.partition(pair, j, node),
                                                 self.N + self.app["heldout"])
        return self.contexts[key]

    def _where(self, t: int, pair: int, j: int, node=None) -> str:
        return (f"flwr_app {self.spec!r} at round {t + 1} (pair {pair}, trajectory {LABELS[j]}"
                + ("" if node is None else f", node {node + fl.NODE_OFFSET}") + ")")

    def initial_rows(self) -> None:
        """Round 0: the common start of every pair (D_0 = 0)."""
        R = self.cfg.pairs
        self.state.record = self.discrepancies()
        self.rows.append(_rows(0, self.state.record, np.zeros(R, dtype=int), np.zeros(R, dtype=int)))

    def advance(self, t: int) -> Optional[str]:
        """Round t (1-based) of every pair, its rows logged; why the run diverged, or None. A call refused in
        round 1 is a ``ConfigError`` (nothing written yet); later, the run's failure (``PluginFailed``)."""
        try:
            why = self.step(t - 1)
        except ConfigError as e:
            if t == 1 or isinstance(e, PluginFailed):
                raise
            raise PluginFailed(str(e)) from None
        if why is None:
            self.state.record = self.rows[-1]["disc"]
            self.skipped += int(self.rows[-1]["skipped"].sum())
        return why

    def take(self) -> list:
        """The row groups logged since the last call."""
        rows, self.rows = self.rows, []
        return rows

    def saved(self) -> bytes:
        """Everything the app run carries between rounds, pickled (strategies, arrays, the nodes' contexts, the
        counts); refused in one line when the app's state cannot be pickled."""
        try:
            return pickle.dumps({"strategies": self.strategies, "arrays": self.arrays, "contexts": self.contexts,
                                 "client_calls": self.client_calls, "skipped": self.skipped})
        except Exception as e:
            raise PluginFailed(f"flwr_app {self.spec!r} cannot be checkpointed: pickling its strategy or its nodes' "
                               f"contexts raised {describe(e)}") from None

    def restore(self, data: bytes, t: int) -> None:
        """Continue from :meth:`saved`'s ``data`` of round ``t``."""
        for k, v in pickle.loads(data).items():
            setattr(self, k, v)
        self.state.round, self.state.record = t, self.discrepancies()

    def discrepancies(self) -> np.ndarray:
        return np.array([self.discrepancy(pair) for pair in range(self.cfg.pairs)])

    def step(self, t: int) -> str | None:
        """Round t (0-based) of every pair; its metrics rows appended. Returns why the run diverged (None: it did
        not)."""
        order = client_order(self.cfg.seed, t, self.cfg.pairs, self.N)
        S = order[:, :self.s]
        cohorts = (S, removed_cohort(self.perturbed, S, order) if self.cfg.perturb == "remove-client" else S)
        keys = hash_keys(self.cfg.seed, "host", np.arange(self.cfg.pairs), t)
        diverged, discs, hits, skips = None, [], [], []
        for pair in range(self.cfg.pairs):
            same_start = fc.same_arrays(self.arrays[pair, 0], self.arrays[pair, 1])
            replies = [self._train(t, pair, j, cohorts[j][pair], int(keys[pair])) for j in (0, 1)]
            if same_start:
                self._check_deterministic(t, pair, replies)
            skipped = [self._aggregate(t, pair, j, replies[j], int(keys[pair])) for j in (0, 1)]
            if same_start and all(fc.same_arrays(a, b) for (_, _, a), (_, _, b) in zip(*replies)) and \
                    not fc.same_arrays(self.arrays[pair, 0], self.arrays[pair, 1]):
                raise ConfigError(f"{self._where(t, pair, 1)}: the strategy is not deterministic: its two copies, "
                                  "handed the same arrays and replies with random and numpy.random seeded alike, "
                                  "aggregated different arrays (a generator of its own or os.urandom?)")
            discs.append(self.discrepancy(pair))
            diverged = diverged or self._divergence(pair, discs[-1])
            hits.append(int(self.cfg.perturb != "none" and self.perturbed[pair] in S[pair]))
            skips.append(int(any(skipped)))
        self.rows.append(_rows(t + 1, np.array(discs), np.array(hits), np.array(skips)))
        return diverged

    def _divergence(self, pair: int, disc: float) -> str | None:
        """Why ``pair`` diverged (non-finite arrays, or D_t or a parameter beyond ``OVERFLOW``), or None."""
        from stabkit.run.roundlog import OVERFLOW  # a paired run's threshold (imported on use: torch)

        arrays = [a for j in (0, 1) for a in self.arrays[pair, j].values()]
        if not (np.isfinite(disc) and all(np.isfinite(a).all() for a in arrays)):
            return "non-finite parameters"
        if disc > OVERFLOW or any(np.abs(a).max(initial=0) > OVERFLOW for a in arrays):
            return f"parameters or discrepancy above {OVERFLOW:g}"
        return None

    def _train(self, t: int, pair: int, j: int, cohort, key: int) -> list:
        """``[(message, reply, arrays)]`` of trajectory j's nodes, sorted by node id."""
        try:
            with fl.flower_calls(key, 0):
                messages = fl.configure(self.strategies[pair, j], t + 1, self.arrays[pair, j], cohort + fl.NODE_OFFSET)
        except Exception as e:
            raise ConfigError(f"{self._where(t, pair, j)}: configure_train raised {describe(e)}") from None
        out = []
        for m in messages:
            node = m.metadata.dst_node_id - fl.NODE_OFFSET
            node_key = int(hash_keys(self.cfg.seed, "flwr-app-node", pair, t, node))
            reply, arrays = fc.call_client(self.app["client_app"], m, self._context(pair, j, node), node_key,
                                           self._where(t, pair, j, node))
            out.append((m, reply, arrays))
            self.client_calls += 1
        return out

    def _check_deterministic(self, t: int, pair: int, replies) -> None:
        """Both trajectories sent the same arrays: every node that trains the same partition in both must
        return the same bits (matched by node: B's cohort may differ in one)."""
        b_arrays = {m.metadata.dst_node_id: b for m, _, b in replies[1]}
        for m, _, a in replies[0]:
            node, b = m.metadata.dst_node_id - fl.NODE_OFFSET, b_arrays.get(m.metadata.dst_node_id)
            if b is not None and self.partition(pair, 1, node) == node and not fc.same_arrays(a, b):
                raise ConfigError(f"{self._where(t, pair, 1, node)}: the ClientApp is not deterministic under a "
                                  "fixed seed: two calls with the same model, partition and seeds (torch, numpy, "
                                  "random) returned different arrays, so even the null pair would drift")

    def _aggregate(self, t: int, pair: int, j: int, replies, key: int) -> bool:
        """Trajectory j's new arrays from its replies; True when the strategy skipped the round."""
        try:
            with fl.flower_calls(key, 1):
                arrays, _ = self.strategies[pair, j].aggregate_train(t + 1, [r for _, r, _ in replies])
        except Exception as e:
            raise ConfigError(f"{self._where(t, pair, j)}: aggregate_train raised {describe(e)}") from None
        if arrays is None:
            return True
        new = fl.unpack(arrays, self.arrays[pair, j])
        if isinstance(new, str):
            raise ConfigError(f"{self._where(t, pair, j)}: aggregate_train returned {new}")
        self.arrays[pair, j] = new
        return False

    def discrepancy(self, pair: int) -> float:
        a, b = self.arrays[pair, 0], self.arrays[pair, 1]
        return float(np.sqrt(sum(np.sum((a[k].astype(np.float64) - b[k]) ** 2) for k in a)))


def describe(e: Exception) -> str:
    return plugins.describe_error(e)


def app_config(spec: str, run: AppRun) -> dict:
    """The config.json of an app run: what it was run with (``flwr_app`` marks it as one)."""
    cfg = run.cfg
    return {"flwr_app": spec, "seed": cfg.seed, "pairs": cfg.pairs, "rounds": cfg.rounds, "clients_per_round": run.s,
            "perturb": cfg.perturb, "partitions": run.N, "heldout": run.app["heldout"]}


def _rows(t: int, disc: np.ndarray, hit: np.ndarray, skipped: np.ndarray) -> dict:
    """Round t's metrics rows, one per pair (the columns of ``metrics.csv``)."""
    return {"round": np.full(len(disc), t), "pair": np.arange(len(disc)), "disc": disc, "disc_sq": disc ** 2,
            "hit": hit, "skipped": skipped}
