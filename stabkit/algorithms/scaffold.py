"""SCAFFOLD (Karimireddy et al. 2020; FedSAGD paper App. C.3).

State: server control variate c, client control variates c_i (all zero at t = 0).

    client: y <- y - eta_l (g_i(y) - c_i + c)                                   K steps
            option II: c_i+ = c_i - c + (x_t - y_K) / (sum_k eta_l,k)           (= K eta_l for a constant lr)
            option I:  c_i+ = grad F_i(x_t)                                     (full local gradient)
            upload d_i = y_K - x_t and dc_i = c_i+ - c_i ;  c_i <- c_i+
    server: x_{t+1} = x_t + eta mean_i d_i
            c <- c + (s/M) mean_i dc_i                                          (N = M, the population)

Guarded against mistakes seen in public implementations: the c_i+ denominator is the lr sum of the K local steps
actually taken (not a size-derived count), clients upload dc_i (not c_i), c is scaled by s/M (not by the
sampled count), and the correction enters as -c_i + c. x_t - y_K is measured from the start point of local
training (x_t unless relaxed initialisation shifts it). At t = 0 all corrections are zero and the round
is FedAvg's, bit for bit.
"""
from dataclasses import dataclass

from stabkit.algorithms.base import Algorithm, HParams, choice, descend
from stabkit.algorithms.rules import client_delta, full_gradient_at_x, gradient_units, on_clients, server_step


@dataclass(frozen=True)
class ScaffoldParams(HParams):
    control: str = choice("II", "control-variate update: II = from the local model change (the paper's and "
                          "the standard choice), I = full local gradient at x_t (one extra gradient per round)",
                          ("II", "I"))


class Scaffold(Algorithm):
    name = "scaffold"
    title = "SCAFFOLD"
    reference = "Karimireddy et al. 2020, ICML (option II); FedSAGD paper App. C.3"
    params_cls = ScaffoldParams
    server_state = ("c",)
    client_state = ("c_i",)

    def client_step(self, ctx, step, y, local, g):
        return descend(y, step.lr, g - ctx.client["c_i"] + on_clients(ctx.server["c"])), local

    def client_final(self, ctx, start, y, local):
        c_i = ctx.client["c_i"]
        if self.p.control == "II":
            c_plus = c_i - on_clients(ctx.server["c"]) + gradient_units(ctx, start, y)
        else:
            c_plus = full_gradient_at_x(ctx)
        return {"delta": client_delta(ctx, y), "dc": c_plus - c_i}, {"c_i": c_plus}

    def server_update(self, ctx, means):
        c = ctx.server["c"] + (ctx.sampled / ctx.num_clients) * means["dc"]
        return server_step(ctx, means["delta"]), {"c": c}
