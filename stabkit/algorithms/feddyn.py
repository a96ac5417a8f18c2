"""FedDyn (Acar et al. 2021; FedSAGD paper App. C.4). The paper's lambda is Acar's alpha.

State: client h_i, server h (zero at t = 0).

    client: y <- y - eta_l (g_i(y) - h_i + lam (y - x_t))        (gradient of the *squared* penalty lam/2 ||y - x_t||^2)
            h_i <- h_i - lam (y_K - x_t) ; upload d_i = y_K - x_t
    server: h <- h - (lam/M) sum_{i in S_t} d_i                  (= (s/M) lam mean_i d_i)
            original:  x_{t+1} = x_t + eta mean_i d_i - h/lam    (eta = 1: Acar's mean_i y_i - h/lam)
            analysis:  x_{t+1} = x_t + eta mean_i d_i            (App. C drops the h-correction)

Variant ``server`` (the FedSAGD analysis drops the h-correction): ``original`` (default, Acar et al.; needs
lam > 0) or ``analysis``. h is maintained in both. Variant ``anchor`` (the FedInit paper leaves it open, see
docs/code-readings.md; matters only under a
relaxed initialisation): ``x_t`` (default; RI moves only the start point) or ``start`` (the FedInit code:
the penalty lam (y - y_0), the h_i update and the server's h use the relaxed start point y_0).
With server=analysis and lam = 0, FedDyn is FedAvg bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, Given, HParams, choice, descend, hp
from stabkit.algorithms.rules import client_delta, server_step
from stabkit.errors import require


@dataclass(frozen=True)
class FedDynParams(HParams):
    lam: float = hp(0.01, "dynamic regularisation weight lambda (Acar et al.'s alpha)", low=0.0)
    server: str = choice("original", "server rule: original = mean_i y_i - h/lambda (Acar et al.), "
                         "analysis = mean_i y_i (the paper's App. C simplification)", ("original", "analysis"))
    anchor: str = choice("x_t", "point the dual correction is anchored at: x_t (default) or start = the client's "
                         "(relaxed) start point y_0, as the FedInit code does with RI", ("x_t", "start"))

    def __post_init__(self):
        super().__post_init__()
        require(self.lam > 0 or self.server == "analysis", "lam", self.lam,
                "> 0 with server=original (the server divides by lambda); lam = 0 needs server=analysis")


class FedDyn(Algorithm):
    name = "feddyn"
    title = "FedDyn"
    reference = "Acar et al. 2021, ICLR; FedSAGD paper App. C.4"
    params_cls = FedDynParams
    server_state = ("h",)
    client_state = ("h_i",)
    local_state = Given("anchor", {"start": ("anchor",)})

    def _anchor(self, ctx, local):
        return local["anchor"] if self.p.anchor == "start" else ctx.x_clients

    def client_step(self, ctx, step, y, local, g):
        if self.p.anchor == "start" and step.k == 0:  # the first step's y is where local training starts
            local = {**local, "anchor": y}
        return descend(y, step.lr, g - ctx.client["h_i"] + self.p.lam * (y - self._anchor(ctx, local))), local

    def client_final(self, ctx, start, y, local):
        d = y - self._anchor(ctx, local)
        uploads = {"delta": client_delta(ctx, y), "h_delta": d} if self.p.anchor == "start" else {"delta": d}
        return uploads, {"h_i": ctx.client["h_i"] - self.p.lam * d}

    def server_update(self, ctx, means):
        lam = self.p.lam
        h = ctx.server["h"] - (lam * ctx.sampled / ctx.num_clients) * means.get("h_delta", means["delta"])
        x = server_step(ctx, means["delta"])
        if self.p.server == "original":
            x = x - h / lam
        return x, {"h": h}
