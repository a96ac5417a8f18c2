"""FedLNAG, local Nesterov momentum (Yu, Jin & Yang 2019; FedSAGD paper App. C.5; fedsagd.md §2.5).

Two momentum forms (``momentum_form``):

    damped_lookahead (paper analysis):  y_look = y - beta m          (lookahead=lr_beta: y - eta_l beta m, UNCERTAIN-05)
                                        m <- beta m + (1 - beta) g_i(y_look) ;  y <- y - eta_l m
    pytorch_nesterov (reference code):  m <- beta m + g_i(y) ;  y <- y - eta_l (g_i(y) + beta m)

and two momentum synchronisations (``momentum_sync``): ``reset`` (m = 0 at the start of every round: the
analysis' m_0 = 0, the code's FedLNAG*; 1x communication) or ``average`` (m starts at u_t, the server
average of the clients' final momenta of the previous round, u_0 = 0; 2x communication, Table 1).
Server: x_{t+1} = x_t + eta mean_i (y_K - x_t). Defaults: the analysed form (damped, reset, y - beta m).
The pytorch form's effective step is about eta_l/(1-beta) (the likely cause of claim C5). beta = 0 is
FedAvg bit for bit in every form.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, Given, HParams, choice, descend, hp
from stabkit.algorithms.rules import client_delta, on_clients, server_step


@dataclass(frozen=True)
class FedLNAGParams(HParams):
    beta: float = hp(0.9, "local momentum coefficient beta", low=0.0, high=1.0, high_open=True)
    momentum_form: str = choice("damped_lookahead", "damped_lookahead = the paper's analysed form, "
                                "pytorch_nesterov = the authors' code (undamped)",
                                ("damped_lookahead", "pytorch_nesterov"))
    momentum_sync: str = choice("reset", "local momentum at the start of a round: reset = 0 (analysis, "
                                "FedLNAG*), average = server mean of last round's client momenta (code)",
                                ("reset", "average"))
    lookahead: str = choice("beta", "damped form's gradient point: beta = y - beta m (as printed), "
                            "lr_beta = y - eta_l beta m (UNCERTAIN-05)", ("beta", "lr_beta"))


class FedLNAG(Algorithm):
    name = "fedlnag"
    title = "FedLNAG"
    reference = "Yu, Jin & Yang 2019, ICML; FedSAGD paper App. C.5 (fedsagd.md §2.5)"
    params_cls = FedLNAGParams
    local_state = ("m",)
    server_state = Given("momentum_sync", {"average": ("u",)})

    def client_init(self, ctx):
        y, local = super().client_init(ctx)  # m = 0 (reset)
        if self.p.momentum_sync == "average":
            local = {"m": on_clients(ctx.server["u"]).expand_as(y).clone()}
        return y, local

    def grad_point(self, ctx, step, y, local):
        if self.p.momentum_form == "pytorch_nesterov":
            return y
        scale = self.p.beta * (step.lr if self.p.lookahead == "lr_beta" else 1.0)
        return y - scale * local["m"]

    def client_step(self, ctx, step, y, local, g):
        beta, m = self.p.beta, local["m"]
        if self.p.momentum_form == "damped_lookahead":
            m = beta * m + (1 - beta) * g
            direction = m
        else:
            m = beta * m + g
            direction = g + beta * m
        return descend(y, step.lr, direction), {"m": m}

    def client_final(self, ctx, start, y, local):
        uploads = {"delta": client_delta(ctx, y)}
        if self.p.momentum_sync == "average":
            uploads["m"] = local["m"]
        return uploads, {}

    def server_update(self, ctx, means):
        new = {"u": means["m"]} if self.p.momentum_sync == "average" else {}
        return server_step(ctx, means["delta"]), new
