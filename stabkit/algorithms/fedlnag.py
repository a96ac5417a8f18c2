"""FedLNAG, local Nesterov momentum (Yu, Jin & Yang 2019; FedSAGD paper App. C.5).

Two momentum forms (``momentum_form``):

    damped_lookahead (paper analysis):  y_look = y - beta m          (lookahead=lr_beta: y - eta_l beta m)
                                        m <- beta m + (1 - beta) g_i(y_look) ;  y <- y - eta_l m
    pytorch_nesterov (reference code):  m <- beta m + g_i(y) ;  y <- y - eta_l (g_i(y) + beta m)

and two momentum synchronisations (``momentum_sync``): ``reset`` (m = 0 at the start of every round: the
analysis' m_0 = 0, the code's FedLNAG*; 1x communication) or ``average`` (m starts at u_t, the server
average of the clients' final momenta of the previous round, u_0 = 0; 2x communication, Table 1).
Server: x_{t+1} = x_t + eta mean_i (y_K - x_t). Defaults: the analysed form (damped, reset, y - beta m).
The pytorch form's effective step is about eta_l/(1-beta) (the likely cause of FedLNAG's largest discrepancy in
the FedSAGD paper's Figures 1 and 2). beta = 0 is FedAvg bit for bit in every form. Each reading is a named entry
of a table (``MOMENTUM_FORMS``, ``SYNCS``, ``LOOKAHEADS``), the paper's analysed one first, so the hooks read no
flags.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, Given, HParams, choice, descend, hp
from stabkit.algorithms.rules import client_delta, on_clients, server_step


# The named variants of each reading, the paper's analysed one first (the default).
def damped_lookahead(beta, m, g):
    """The paper's analysed form: ``m <- beta m + (1 - beta) g``, step along m; returns (direction, m)."""
    m = beta * m + (1 - beta) * g
    return m, m


def pytorch_nesterov(beta, m, g):
    """The reference code's undamped form: ``m <- beta m + g``, step along ``g + beta m``."""
    m = beta * m + g
    return g + beta * m, m


MOMENTUM_FORMS = {"damped_lookahead": damped_lookahead, "pytorch_nesterov": pytorch_nesterov}
# where the damped form evaluates the gradient: y - scale m, scale from (beta, the step's lr); the paper's
# lookahead reads as beta or as eta_l beta
LOOKAHEADS = {"beta": lambda beta, lr: beta * 1.0, "lr_beta": lambda beta, lr: beta * lr}


class ResetSync:
    """m = 0 at the start of every round: the analysis' m_0 = 0, the code's FedLNAG* (1x communication)."""

    server_state = ()

    def start(self, ctx, y, local):
        return local

    def uploads(self, local) -> dict:
        return {}

    def server(self, means) -> dict:
        return {}


class AverageSync:
    """m starts at u_t, the server mean of the clients' final momenta of the previous round (u_0 = 0; 2x
    communication, Table 1)."""

    server_state = ("u",)

    def start(self, ctx, y, local):
        return {"m": on_clients(ctx.server["u"]).expand_as(y).clone()}

    def uploads(self, local) -> dict:
        return {"m": local["m"]}

    def server(self, means) -> dict:
        return {"u": means["m"]}


SYNCS = {"reset": ResetSync(), "average": AverageSync()}


@dataclass(frozen=True)
class FedLNAGParams(HParams):
    beta: float = hp(0.9, "local momentum coefficient beta", low=0.0, high=1.0, high_open=True)
    momentum_form: str = choice("damped_lookahead", "damped_lookahead = the paper's analysed form, "
                                "pytorch_nesterov = the authors' code (undamped)", tuple(MOMENTUM_FORMS))
    momentum_sync: str = choice("reset", "local momentum at the start of a round: reset = 0 (analysis, "
                                "FedLNAG*), average = server mean of last round's client momenta (code)",
                                tuple(SYNCS))
    lookahead: str = choice("beta", "damped form's gradient point: beta = y - beta m (as printed), "
                            "lr_beta = y - eta_l beta m", tuple(LOOKAHEADS))


class FedLNAG(Algorithm):
    name = "fedlnag"
    title = "FedLNAG"
    reference = "Yu, Jin & Yang 2019, ICML; FedSAGD paper App. C.5"
    params_cls = FedLNAGParams
    local_state = ("m",)
    server_state = Given("momentum_sync", {name: sync.server_state for name, sync in SYNCS.items()})

    def __init__(self, params=None):
        super().__init__(params)
        self.step_rule = MOMENTUM_FORMS[self.p.momentum_form]
        self.sync = SYNCS[self.p.momentum_sync]

    def client_init(self, ctx):
        y, local = super().client_init(ctx)  # m = 0
        return y, self.sync.start(ctx, y, local)

    def grad_point(self, ctx, step, y, local):
        if self.step_rule is pytorch_nesterov:  # the undamped form takes the gradient at y
            return y
        return y - LOOKAHEADS[self.p.lookahead](self.p.beta, step.lr) * local["m"]

    def client_step(self, ctx, step, y, local, g):
        direction, m = self.step_rule(self.p.beta, local["m"], g)
        return descend(y, step.lr, direction), {"m": m}

    def client_final(self, ctx, start, y, local):
        return {"delta": client_delta(ctx, y), **self.sync.uploads(local)}, {}

    def server_update(self, ctx, means):
        return server_step(ctx, means["delta"]), self.sync.server(means)
