"""Bound machinery: a run's setting, the Bound record, per-round recursions and the registry.

Every paper bound is a small function ``f(setting) -> Bound`` registered for one or more algorithms
with :func:`register`. Bounds on the global discrepancy are evaluated as per-round recursions
``D_{t+1} <= a_t D_t + b_t`` (:func:`iterate`), so learning-rate schedules and measured time-varying
constants (Θ_t, ||v_t||) just work; closed forms are attached where they exist so tests can check that
both agree. Every bound carries its validity conditions: a bound whose conditions fail is reported as
such (``Bound.valid`` is False and ``failed`` names them), never silently drawn as if it held.

Users register bounds for their own algorithms the same way: ``@register("myalgo", name="mine.theorem")``
in a module that is imported when the algorithm is (e.g. the algorithm's own module), or in a module
(or a decorated function) named by an entry point of the group ``stabkit.bounds``; an entry point naming
an undecorated function registers it for the algorithm called like the entry point. ``bounds_for``
loads the installed entry points on first use.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from stabkit import plugins
from stabkit.errors import ConfigError

# Canonical names of the constants a Setting may carry (estimators in stabkit.run.constants):
CONSTANTS = {
    "theta_max": "max raw minibatch-gradient norm over both runs, all rounds, clients, steps (Θ_emp_max)",
    "theta_rms": "rms of the same (Θ_emp_rms)",
    "L": "smoothness: largest Hessian eigenvalue of f along the trajectory (+ weight decay)",
    "sigma_l2": "local minibatch-gradient variance at the run's batch size (max over clients)",
    "sigma_l2_sample": "per-sample gradient variance (batch size 1, max over clients)",
    "sigma_g2": "heterogeneity max_i ||grad F_i - grad f||^2 (max over probe iterates)",
    "sigma_g2_mean": "heterogeneity, mean over clients",
    "G": "max per-sample loss-gradient norm (Lipschitz constant of the loss)",
    "L_G": "max ||grad f(x_t)|| along the trajectory",
    "F0": "initial gap f(x_0) - min_t f(x_t)",
    "f_star": "min_t f(x_t), proxy of the empirical minimum",
    "mu_pl": "PL constant min_t ||grad f||^2 / (2 (f - f_star))",
    "U": "max per-sample loss observed",
}

# Knobs of the bounds (Setting.options), chosen by the user rather than measured or taken from the algorithm:
OPTIONS = {
    "c": "Libra: the constant of eta_g^t <= sqrt(c/t) (default eta_g^2); FedInit: eta_t = c/t (default lr[0])",
    "C_opt": "Libra: the constant C of the optimisation term (default 1/(2 mu_pl))",
}

# Canonical names of measured curves (means over pairs, index t = 0..T):
MEASURED = {
    "disc": "||x_t - x'_t||", "disc_sq": "||x_t - x'_t||^2", "grad_norm_sq": "||grad f(x_t)||^2",
    "train_loss": "f(x_t)", "test_loss": "test loss", "gap": "test - train loss",
    "theta_t": "per-round max raw gradient norm (index t = the round producing x_t; entry 0 unused)",
    "state_norm_sum/<name>": "||s_t|| + ||s'_t|| of a server state vector (e.g. FedSAGD's v)",
}


def hp_value(hp: dict, algo: str, name: str):
    """``hp[name]``: a hyperparameter a bound of ``algo`` needs; a missing one is a ValueError naming it (a run's
    ``hp_resolved`` always has them all; plain-number callers pass them explicitly)."""
    if name not in hp:
        raise ValueError(f"the {algo} bound needs hyperparameter {name!r} (given: {', '.join(sorted(hp)) or 'none'})")
    return hp[name]


# Display names of the papers behind the bound families (the prefix of ``Bound.name``)
PAPERS = {"fedsagd": "FedSAGD", "fedswa": "FedSWA", "libra": "Libra", "fedinit": "FedInit",
          "hardt": "Hardt et al. 2016", "dp": "DP => stability"}


class UnknownHyperparameter(KeyError):
    """``setting.hp[name]`` for a name the run's algorithm does not have."""


class Hyperparameters(dict):
    """The run's hyperparameters; a missing name raises :class:`UnknownHyperparameter` (so a bound reading
    one its algorithm lacks is named as such, not reported as a missing constant)."""

    def __missing__(self, name):
        raise UnknownHyperparameter(name)


@dataclass
class Setting:
    """What bounds need from a run: its configuration, estimated constants and measured curves."""

    algo: str
    hp: dict  # the algorithm's full hyperparameters by its own names (config.json's hp_resolved)
    K: int
    T: int
    s: int  # clients per round
    M: int  # training clients
    n: int  # samples per client (min over training clients)
    b: int  # batch size (n for full batch)
    lr: np.ndarray  # client lr of rounds 0..T-1 (after per-round decay)
    global_lr: float = 1.0
    weight_decay: float = 0.0
    constants: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # knobs of the bounds themselves, not of the algorithm (OPTIONS)
    privacy: dict = field(default_factory=dict)  # a DP run's schedule and delta (privacy.json), {} for other runs

    def __post_init__(self):
        self.hp = Hyperparameters(self.hp)

    def param(self, name: str):
        """A hyperparameter of the run's algorithm by its own name (ValueError naming a missing one)."""
        return hp_value(self.hp, self.algo, name)

    def option(self, name: str, default):
        """A bound knob by name (:data:`OPTIONS`), ``default`` when the user set none."""
        return self.options.get(name, default)

    def round_lrs(self) -> np.ndarray:
        """The client lr of rounds 0..T-1 as a float array (``lr`` may be longer, e.g. a whole schedule)."""
        return np.asarray(self.lr, float)[: self.T]

    def const(self, name: str) -> float:
        """A constant by canonical name; KeyError names the missing constant."""
        if name not in self.constants or self.constants[name] is None:
            raise KeyError(f"constant {name!r} ({CONSTANTS.get(name, '?')}) is not available")
        return float(self.constants[name])


@dataclass
class Bound:
    """One instantiated bound: values over rounds (or local steps) plus where it comes from and whether it holds."""

    name: str  # e.g. "fedsagd.theorem"
    algo: str
    quantity: str  # "disc" | "disc_sq" | "local_disc" | "excess_risk" | "gen_gap" | "divergence" | ...
    form: str  # "paper" | "corrected" | "theorem" | "table1" | "rigorous" | ...
    source: str  # the paper and where in it, e.g. "FedSAGD Table 1"
    values: np.ndarray  # index t = 0..T (or k = 0..K for local bounds)
    closed_form: Optional[np.ndarray] = None
    conditions: dict = field(default_factory=dict)  # condition text -> bool
    derived: dict = field(default_factory=dict)  # Gamma, zeta, asymptote, crossover ...
    note: str = ""

    @property
    def title(self) -> str:
        """A readable name for legends: paper, table or theorem, form, e.g. ``FedSAGD Table 1, corrected``."""
        prefix = self.name.split(":")[0].split(".")[0]
        paper, where = "", self.source or PAPERS.get(prefix, prefix)
        variant = self.name.split(".", 1)[-1].replace(f"{self.form}", "").strip("._")
        extra = {"theta_t": "per-round Θ_t", "": ""}.get(variant, "") if self.quantity == "disc" else ""
        return f"{paper} {where}".strip() + f", {self.form}" + (f", {extra}" if extra else "")

    @property
    def valid(self) -> bool:
        return all(self.conditions.values())

    @property
    def failed(self) -> list:
        return [c for c, ok in self.conditions.items() if not ok]


def iterate(a, b, d0: float = 0.0) -> np.ndarray:
    """``D_0 = d0``, ``D_{t+1} = a_t D_t + b_t`` for t = 0..T-1; ``a``, ``b`` scalars or length-T arrays.

    Returns ``[T + 1]``. T is the length of the longer of a and b (both scalars: T = 1).
    """
    a, b = np.atleast_1d(np.asarray(a, float)), np.atleast_1d(np.asarray(b, float))
    T = max(len(a), len(b))
    a, b = np.broadcast_to(a, (T,)), np.broadcast_to(b, (T,))
    out = np.empty(T + 1)
    out[0] = d0
    for t in range(T):
        out[t + 1] = a[t] * out[t] + b[t]
    return out


def geometric_closed(a, b, t) -> np.ndarray:
    """Closed form of ``D_{s+1} = a D_s + b``, ``D_0 = 0`` at steps ``t`` (constant a, b): ``b t`` if a = 1, else
    ``b (1 - a^t) / (1 - a)``, written with a positive denominator (so D_0 is +0.0, not -0.0)."""
    if a == 1:
        return b * t
    return b * (1 - a ** t) / (1 - a) if a < 1 else b * (a ** t - 1) / (a - 1)


def contraction_sum(rate, eta, k):
    """``(1 - (1 - eta rate)^k) / rate`` = ``eta sum_{j<k} (1 - eta rate)^j``, the weight k contracting steps
    of size eta give a constant increment; its limit ``eta k`` at rate = 0."""
    return (1.0 - (1.0 - eta * rate) ** k) / rate if rate > 0 else eta * k


def geometric_sum(q, T):
    """S_T(q) = sum_{s<T} q^s (= T if q = 1)."""
    T = np.asarray(T, float)
    return T if abs(q - 1.0) < 1e-15 else (q ** T - 1.0) / (q - 1.0)


def at_horizons(T: int, f: Callable, first: float = np.nan) -> np.ndarray:
    """``values[t] = f(t)`` for every horizon t = 1..T of a bound stated at its final round, ``values[0] = first``."""
    values = np.full(T + 1, first, dtype=float)
    for t in range(1, T + 1):
        values[t] = f(t)
    return values


_REGISTRY: dict = {}  # algo -> list of (name, fn)
DP_KEY = "+dp"  # bounds registered under this key apply to every DP run (Setting.privacy), whatever its algorithm
_ENTRY_POINTS_LOADED = False


def register(*algos: str, name: str) -> Callable:
    """Decorator: ``fn(setting) -> Bound | list[Bound]`` applies to runs of ``algos`` (their ``--algo``
    names, or for a plug-in its class's ``name``). A function that cannot be called with exactly one
    setting is a one-line ConfigError naming it."""

    def deco(fn):
        _check_signature(fn, name)
        for algo in algos:
            if (name, fn) not in _REGISTRY.get(algo, []):
                _REGISTRY.setdefault(algo, []).append((name, fn))
        fn.stabkit_bound = name
        return fn

    return deco


def _check_signature(fn, name: str) -> None:
    try:
        inspect.signature(fn).bind(object())
    except (TypeError, ValueError):
        where = plugins.import_path_of(fn) or repr(fn)
        raise ConfigError(f"invalid bound={name!r} ({where}): must be a function f(setting) -> Bound or "
                          f"list of Bound taking exactly one argument") from None


def load_installed() -> None:
    """Import the bounds installed under the entry-point group ``stabkit.bounds`` (once); one that fails to
    load is named in a warning and skipped."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    for ep_name in plugins.installed("bound"):
        try:
            obj = plugins.load("bound", ep_name)
            if callable(obj) and not hasattr(obj, "stabkit_bound"):
                register(ep_name, name=f"{ep_name}.{getattr(obj, '__name__', 'bound')}")(obj)
        except ConfigError as e:  # one broken plug-in: warned about once, every other bound still applies
            plugins.warn_broken("bound", ep_name, e)
    _ENTRY_POINTS_LOADED = True


def bounds_for(setting: Setting) -> list:
    """Every registered bound for the setting's algorithm; bounds missing a constant are skipped and
    listed in the returned bounds' ``note`` of a placeholder with ``conditions={'constants available': False}``."""
    load_installed()
    out = []
    for name, fn in _REGISTRY.get(setting.algo, []) + (_REGISTRY.get(DP_KEY, []) if setting.privacy else []):
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # an exponential bound may be vacuous (inf)
                result = fn(setting)
        except UnknownHyperparameter as e:  # a bug of the bound, not a constant this run lacks
            raise ConfigError(f"invalid bound={name!r} ({plugins.import_path_of(fn) or repr(fn)}): reads "
                              f"hyperparameter {e.args[0]!r}, which {setting.algo} does not have (its "
                              f"hyperparameters: {', '.join(sorted(setting.hp)) or 'none'})") from None
        except KeyError as e:
            missing = e.args[0] if e.args else str(e)
            nan = np.full(setting.T + 1, np.nan)
            out.append(Bound(name, setting.algo, "disc", "unavailable", "", nan,
                             conditions={"constants available": False}, note=str(missing)))
            continue
        except Exception as e:
            raise ConfigError(f"invalid bound={name!r} ({plugins.import_path_of(fn) or fn!r}): evaluating it "
                              f"raised {plugins.describe_error(e)}") from None
        result = result if isinstance(result, list) else [result]
        wrong = [type(b).__name__ for b in result if not isinstance(b, Bound)]
        if wrong:
            raise ConfigError(f"invalid bound={name!r} ({plugins.import_path_of(fn) or fn!r}): returned "
                              f"{wrong[0]}, expected a Bound or a list of Bound")
        out.extend(result)
    return out


def registered() -> dict:
    """``algo -> [bound names]`` (for docs and tests)."""
    return {a: [n for n, _ in fns] for a, fns in _REGISTRY.items()}
