"""FedSWA, FedMoSWA and FedMo (Liu et al., ICML 2025; FedSWA paper, Algorithm 1).

Shared pieces (``SWAServer``): the within-round linear learning-rate decay with restart (the paper's Eq. (3))

    eta_k = eta_l [1 - (1 - rho) k / K],  k = 0..K-1     (eta_l = the round's lr after the run's per-round decay)

and the server "EMA" / extrapolation (Alg. 1 line 17)

    x_t = x_{t-1} + alpha (mean_i y_i - x_{t-1})          here: x + (eta_g * alpha) mean_i (y_i - x),

i.e. alpha multiplies the run's global lr eta_g (eta_g = 1 gives the paper's rule).

FedSWA (paper, Section 3.2): local SGD with the schedule, server as above. rho = 1, alpha = 1 is FedAvg bit for bit.

FedMoSWA (Section 3.3): clients keep c_i, the server keeps m (both zero-initialised unless ``init = grad``):

    local:    y <- y - eta_k (g - c_i + m)                                            (Eq. 5)
    Option I: c_i^+ = grad F_i(x_{t-1})  (full local gradient, treated like g by ``ctx.process``)
    Option II: c_i^+ = c_i - m + (y_0 - y_K) / sum_k eta_k  (exact sum of the round's step lrs)
    upload:   c_i^+ - m  (not c_i^+ - c_i);  server  m <- m + gamma mean_i (c_i^+ - m)  (Eq. 7)
    model:    the SWA server above.

Variants where the paper is ambiguous: ``option`` = II (paper's experiments, default) | I (SCAFFOLD timing:
c_i^+ at x_{t-1} after the round) | I_same_round (the proofs' timing: c_i = grad F_i(x_{t-1}) and the new
m are computed before the local steps and used in the same round); ``init`` = zeros (code, default)
| grad (theory: at round 0 every sampled client's c_i = grad F_i(x_0) and m^0 = their mean; exact under full
participation, clients first sampled later keep c_i = 0) | first_upload (code: zeros, and round 0's server step
is m = mean_i (c_i^+ - m), gamma = 1 once); ``denominator`` = exact (paper) | code (K eta_l (1 + rho)/2).
The authors' code's reading (docs/code-readings.md) is gamma = 0.1, init = first_upload, denominator = code (the
``fedswa-*`` presets). Each reading is a named entry of a table (``OPTIONS``: when c_i^+ is refreshed;
``INITS``; ``DENOMINATORS``), the paper's first, so the hooks read no flags. Under a relaxed initialisation Option II measures
the local displacement from the actual start point y_0.

FedMo (the paper's ablation, Section 6.2) = FedMoSWA with rho = 1, alpha = 1 (its own defaults, same class).
"""
from dataclasses import dataclass
from typing import NamedTuple, Optional

from stabkit.algorithms.base import Algorithm, Given, HParams, choice, descend, hp
from stabkit.algorithms.rules import client_delta, full_gradient_at_x, gradient_units, on_clients, server_step

_RHO = dict(doc="within-round lr decay ratio rho (last step ~ rho * lr; 1 = constant lr)", low=0.0, high=1.0)
_ALPHA_DOC = ("server EMA / extrapolation alpha, multiplies the global lr (paper 1.5 for FedSWA and FedMoSWA; "
              "1 = plain averaging)")
_GAMMA_DOC = "server control-variable rate gamma: m <- m + gamma mean_i (c_i^+ - m)"
_OPTION_DOC = "control-variate refresh: II (paper) | I (SCAFFOLD timing) | I_same_round (proofs' timing)"
_INIT_DOC = ("initial c_i, m: zeros | grad (theory: c_i = grad F_i(x_0), m = mean) | "
             "first_upload (code: zeros, and the first round sets m = mean upload instead of gamma-stepping)")
_DENOMINATOR_DOC = ("Option II denominator: exact = sum_k eta_k (paper) | "
                    "code = K eta_l (1 + rho)/2 (the authors' code)")
def linear_decay_lr(lr: float, rho: float, k: int, K: int) -> float:
    """FedSWA's Eq. (3): lr of local step k of K, restarting at ``lr`` every round."""
    return lr * (1.0 - (1.0 - rho) * k / K)


class SWAServer(Algorithm):
    """The shared FedSWA machinery: scheduled local lr and the server extrapolation (needs ``rho``, ``alpha``)."""

    def local_lrs(self, lr, K):
        return tuple(linear_decay_lr(lr, self.p.rho, k, K) for k in range(K))

    def server_model(self, ctx, means):
        return server_step(ctx, means["delta"], self.p.alpha)

    def server_update(self, ctx, means):
        return self.server_model(ctx, means), {}


@dataclass(frozen=True)
class FedSWAParams(HParams):
    rho: float = hp(0.1, **_RHO)
    alpha: float = hp(1.5, _ALPHA_DOC, low=0.0, low_open=True)


class FedSWA(SWAServer):
    name = "fedswa"
    title = "FedSWA"
    reference = "Liu et al., ICML 2025, Section 3.2 and Algorithm 1"
    params_cls = FedSWAParams


# ----------------------------------------------------------------- FedMoSWA's named variants (paper's first)
def exact_units(ctx, start, y, rho):
    """Option II's (start - y_K) / sum_k eta_k: the exact sum of the round's step lrs (the paper)."""
    return gradient_units(ctx, start, y)


def code_units(ctx, start, y, rho):
    """The authors' code: (start - y_K) / (K eta_l (1 + rho)/2)."""
    return (start - y) / (ctx.local_steps * ctx.lr * (1 + rho) / 2)


DENOMINATORS = {"exact": exact_units, "code": code_units}


class Init(NamedTuple):
    """Initial c_i, m: ``grad`` sets c_i = grad F_i(x_0) and m^0 = their mean in round 0;
    ``first_rate`` replaces gamma in round 0 (the code's m = mean upload)."""

    grad: bool = False
    first_rate: Optional[float] = None


INITS = {"zeros": Init(), "grad": Init(grad=True), "first_upload": Init(first_rate=1.0)}


class RefreshAfter:
    """Options II and I: c_i^+ is computed after the local steps (from the local change, or as the full local
    gradient at x_{t-1}: SCAFFOLD's timing) and takes effect next round."""

    local_state = ("c", "m")

    def __init__(self, full_gradient: bool):
        self.full_gradient = full_gradient

    def before(self, algo, ctx, local):
        return local

    def after(self, algo, ctx, start, y, local):
        m = on_clients(local["m"])
        if self.full_gradient:
            c_plus = full_gradient_at_x(ctx)
        else:
            c_plus = local["c"] - m + DENOMINATORS[algo.p.denominator](ctx, start, y, algo.p.rho)
        return c_plus, c_plus - m


class RefreshBefore:
    """Option I_same_round (the proofs' timing): c_i = grad F_i(x_{t-1}) and the new m are computed before the
    local steps and used in them."""

    local_state = ("c", "m", "c_up")

    def before(self, algo, ctx, local):
        c = full_gradient_at_x(ctx)
        c_up = c - on_clients(local["m"])
        return {"c": c, "m": local["m"] + algo.rate(ctx) * c_up.mean(dim=2), "c_up": c_up}

    def after(self, algo, ctx, start, y, local):
        return local["c"], local["c_up"]


OPTIONS = {"II": RefreshAfter(full_gradient=False), "I": RefreshAfter(full_gradient=True),
           "I_same_round": RefreshBefore()}


@dataclass(frozen=True)
class FedMoSWAParams(HParams):
    rho: float = hp(0.1, **_RHO)
    alpha: float = hp(1.5, _ALPHA_DOC, low=0.0, low_open=True)
    gamma: float = hp(0.2, _GAMMA_DOC, low=0.0, high=1.0)
    option: str = choice("II", _OPTION_DOC, tuple(OPTIONS))
    init: str = choice("zeros", _INIT_DOC, tuple(INITS))
    denominator: str = choice("exact", _DENOMINATOR_DOC, tuple(DENOMINATORS))


@dataclass(frozen=True)
class FedMoParams(FedMoSWAParams):
    rho: float = hp(1.0, **_RHO)
    alpha: float = hp(1.0, _ALPHA_DOC, low=0.0, low_open=True)


class FedMoSWA(SWAServer):
    name = "fedmoswa"
    title = "FedMoSWA"
    reference = "Liu et al., ICML 2025, Section 3.3, Eqs. (5)-(7) and Algorithm 1"
    params_cls = FedMoSWAParams
    server_state = ("m",)
    client_state = ("c",)
    # the round's c_i and m (the carried ones unless this round sets them before the local steps)
    local_state = Given("option", {name: refresh.local_state for name, refresh in OPTIONS.items()})

    def __init__(self, params=None):
        super().__init__(params)
        self.refresh, self.init = OPTIONS[self.p.option], INITS[self.p.init]

    def _grad_init(self, ctx) -> bool:
        return self.init.grad and ctx.t == 0

    def rate(self, ctx) -> float:
        """The server rate of this round: gamma, or the init's first rate in round 0."""
        return self.init.first_rate if self.init.first_rate is not None and ctx.t == 0 else self.p.gamma

    def client_init(self, ctx):
        c, m = ctx.client["c"], ctx.server["m"]
        if self._grad_init(ctx):
            c = full_gradient_at_x(ctx)
            m = c.mean(dim=2)
        return ctx.x_clients, self.refresh.before(self, ctx, {"c": c, "m": m})

    def client_step(self, ctx, step, y, local, g):
        return descend(y, step.lr, g - local["c"] + on_clients(local["m"])), local

    def client_final(self, ctx, start, y, local):
        uploads = {"delta": client_delta(ctx, y)}
        if self._grad_init(ctx):  # c_i = grad F_i(x_0); their mean is m^0
            uploads["c0"] = local["c"]
        c_plus, c_up = self.refresh.after(self, ctx, start, y, local)
        return {**uploads, "c_up": c_up}, {"c": c_plus}

    def server_update(self, ctx, means):
        # m_t = m_{t-1} + gamma mean_i (c_i^+ - m_{t-1}); under I_same_round the clients applied the same
        # update before their local steps (and used it in them)
        m = means["c0"] if self._grad_init(ctx) else ctx.server["m"]
        return self.server_model(ctx, means), {"m": m + self.rate(ctx) * means["c_up"]}


class FedMo(FedMoSWA):
    name = "fedmo"
    title = "FedMo"
    reference = "Liu et al., ICML 2025, ablation (ii): FedMoSWA with rho = 1, alpha = 1"
    params_cls = FedMoParams
