"""FedSWA, FedMoSWA and FedMo (Liu et al., ICML 2025; fedswa.md §1.1-1.6).

Shared pieces (``SWAServer``): the within-round linear learning-rate decay with restart (Eq. 3, §1.2)

    eta_k = eta_l [1 - (1 - rho) k / K],  k = 0..K-1     (eta_l = the round's lr after the run's per-round decay)

and the server "EMA" / extrapolation (Alg. 1 line 17, §1.3)

    x_t = x_{t-1} + alpha (mean_i y_i - x_{t-1})          here: x + (eta_g * alpha) mean_i (y_i - x),

i.e. alpha multiplies the run's global lr eta_g (eta_g = 1 gives the paper's rule).

FedSWA (§1.3): local SGD with the schedule, server as above. rho = 1, alpha = 1 is FedAvg bit for bit.

FedMoSWA (§1.4): clients keep c_i, the server keeps m (both zero-initialised unless ``init = grad``):

    local:    y <- y - eta_k (g - c_i + m)                                            (Eq. 5)
    Option I: c_i^+ = grad F_i(x_{t-1})  (full local gradient, treated like g: clipping + weight decay)
    Option II: c_i^+ = c_i - m + (y_0 - y_K) / sum_k eta_k  (exact sum of the round's step lrs, U5)
    upload:   c_i^+ - m  (not c_i^+ - c_i);  server  m <- m + gamma mean_i (c_i^+ - m)  (Eq. 7)
    model:    the SWA server above.

Variants of the spec's UNCERTAIN items: ``option`` = II (paper's experiments, default) | I (SCAFFOLD timing:
c_i^+ at x_{t-1} after the round, U4) | I_same_round (the proofs' timing: c_i = grad F_i(x_{t-1}) and the new
m are computed before the local steps and used in the same round, U4); ``init`` (U6) = zeros (code, default)
| grad (theory: at round 0 every sampled client's c_i = grad F_i(x_0) and m^0 = their mean; exact under full
participation, clients first sampled later keep c_i = 0). Under a relaxed initialisation Option II measures
the local displacement from the actual start point y_0.

FedMo (§1.5, U8) = FedMoSWA with rho = 1, alpha = 1 (its own defaults, same class).
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, choice, descend, hp

_RHO = dict(doc="within-round lr decay ratio rho (last step ~ rho * lr; 1 = constant lr)", low=0.0, high=1.0)
_ALPHA_DOC = ("server EMA / extrapolation alpha, multiplies the global lr (paper 1.5 for FedSWA and FedMoSWA, "
              "UNCERTAIN-U7; 1 = plain averaging)")
_GAMMA_DOC = "server control-variable rate gamma: m <- m + gamma mean_i (c_i^+ - m)"
_OPTION_DOC = "control-variate refresh: II (paper) | I (SCAFFOLD timing) | I_same_round (proofs' timing)"
_INIT_DOC = "initial c_i, m (UNCERTAIN-U6): zeros (code) | grad (theory: c_i = grad F_i(x_0), m = mean)"
OPTIONS = ("II", "I", "I_same_round")
INITS = ("zeros", "grad")


def linear_decay_lr(lr: float, rho: float, k: int, K: int) -> float:
    """FedSWA's Eq. (3): lr of local step k of K, restarting at ``lr`` every round."""
    return lr * (1.0 - (1.0 - rho) * k / K)


class SWAServer(Algorithm):
    """The shared FedSWA machinery: scheduled local lr and the server extrapolation (needs ``rho``, ``alpha``)."""

    def step_lr(self, ctx, k):
        return linear_decay_lr(ctx.lr, self.p.rho, k, ctx.local_steps)

    def round_lr_sum(self, ctx) -> float:
        """sum_k eta_k^t over the round's local steps (the exact Option II denominator)."""
        return sum(self.step_lr(ctx, k) for k in range(ctx.local_steps))

    def server_model(self, ctx, means):
        return ctx.x + (ctx.global_lr * self.p.alpha) * means["delta"]

    def server_update(self, ctx, means):
        return self.server_model(ctx, means), {}


@dataclass(frozen=True)
class FedSWAParams(HParams):
    rho: float = hp(0.1, **_RHO)
    alpha: float = hp(1.5, _ALPHA_DOC, low=0.0, low_open=True)


class FedSWA(SWAServer):
    name = "fedswa"
    title = "FedSWA"
    reference = "Liu et al., ICML 2025, §3.2 and Algorithm 1 (fedswa.md §1.2-1.3)"
    params_cls = FedSWAParams


@dataclass(frozen=True)
class FedMoSWAParams(HParams):
    rho: float = hp(0.1, **_RHO)
    alpha: float = hp(1.5, _ALPHA_DOC, low=0.0, low_open=True)
    gamma: float = hp(0.2, _GAMMA_DOC, low=0.0, high=1.0)
    option: str = choice("II", _OPTION_DOC, OPTIONS)
    init: str = choice("zeros", _INIT_DOC, INITS)


@dataclass(frozen=True)
class FedMoParams(FedMoSWAParams):
    rho: float = hp(1.0, **_RHO)
    alpha: float = hp(1.0, _ALPHA_DOC, low=0.0, low_open=True)


class FedMoSWA(SWAServer):
    name = "fedmoswa"
    title = "FedMoSWA"
    reference = "Liu et al., ICML 2025, §3.3, Eqs. (5)-(7) and Algorithm 1 (fedswa.md §1.4)"
    params_cls = FedMoSWAParams
    server_state = ("m",)
    client_state = ("c",)

    def _grad_at_x(self, ctx):
        """grad F_i(x_{t-1}) on each client's full local data, treated like a step gradient."""
        return ctx.process(ctx.full_grad_fn(ctx.x0), ctx.x0)

    def _c(self, ctx):
        return ctx.local.get("c", ctx.client["c"])

    def _m(self, ctx):
        """The round's m [R, 2, d] (the carried one unless this round set it before the local steps)."""
        return ctx.local.get("m", ctx.server["m"])

    def client_start(self, ctx, y):
        if self.p.init == "grad" and ctx.t == 0:
            c0 = self._grad_at_x(ctx)
            ctx.local["c"], ctx.local["m"] = c0, c0.mean(dim=2)
        if self.p.option == "I_same_round":
            c, m = self._grad_at_x(ctx), self._m(ctx)
            ctx.local["c_up"] = c - m[:, :, None, :]
            ctx.local["c"], ctx.local["m"] = c, m + self.p.gamma * ctx.local["c_up"].mean(dim=2)
        return y

    def local_step(self, ctx, y, g, k):
        return descend(y, self.step_lr(ctx, k), g - self._c(ctx) + self._m(ctx)[:, :, None, :])

    def client_finish(self, ctx, y):
        if self.p.option == "I_same_round":
            c_plus, c_up = ctx.local["c"], ctx.local["c_up"]
        else:
            m = self._m(ctx)[:, :, None, :]
            if self.p.option == "I":
                c_plus = self._grad_at_x(ctx)
            else:
                c_plus = self._c(ctx) - m + (ctx.start - y) / self.round_lr_sum(ctx)
            c_up = c_plus - m
        return {"delta": y - ctx.x0, "c_up": c_up}, {"c": c_plus}

    def server_update(self, ctx, means):
        if self.p.option == "I_same_round":
            m = ctx.local["m"]  # already m_old + gamma mean_i (c_i^+ - m_old), computed before the local steps
        else:
            m = self._m(ctx) + self.p.gamma * means["c_up"]
        return self.server_model(ctx, means), {"m": m}


class FedMo(FedMoSWA):
    name = "fedmo"
    title = "FedMo"
    reference = "Liu et al., ICML 2025, ablation (ii): FedMoSWA with rho = 1, alpha = 1 (fedswa.md §1.5)"
    params_cls = FedMoParams
