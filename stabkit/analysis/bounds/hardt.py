"""Hardt, Recht & Singer 2016 ("Train faster, generalize better"): uniform stability of SGD, as a single-machine
REFERENCE for FedAvg runs (not a federated-learning bound).

Implemented (n samples, L-Lipschitz loss, beta-smooth, step sizes eta_j of the j-th SGD step, j = 1..T):
  * Theorem 3.8 (convex, eta_j <= 2/beta):          eps_stab <= (2 L^2 / n) sum_{j=1}^T eta_j
  * Theorem 3.12 (non-convex, loss in [0, 1], eta_j <= c/j):
        eps_stab <= (1 + 1/(beta c)) / (n - 1) * (2 c L^2)^{1/(beta c + 1)} * T^{beta c/(beta c + 1)}
    from the proof's  eps <= t0 U/n + (2 L^2/(beta (n-1))) (T/t0)^{beta c}  (Lemma 3.11 + the non-convex growth
    recursion), optimised at t0 = (2 c L^2 / U)^{1/(q+1)} T^{q/(q+1)}, q = beta c; U = sup loss (U = 1 gives 3.12;
    the first term is bounded with n - 1 as in the paper).
Both bound the generalisation gap (quantity "gen_gap"; uniform stability in loss).

Mapping of a FedAvg run (reference only): T K SGD steps with step size lr[t] * global_lr in round t, on the pooled
n = M * n samples; L = ``G`` (loss Lipschitz constant), beta = ``L`` (smoothness), U = ``U``;
c = max_j j eta_j (so eta_j <= c/j holds by construction); convexity is declared by constants["convex"].
"""
from __future__ import annotations

import numpy as np

from stabkit.analysis.bounds.base import Bound, Setting, register

SRC = "Hardt, Recht & Singer 2016"


def convex(eta_steps, L, n):
    """Thm 3.8: (2 L^2/n) sum_j eta_j, cumulative over the steps: returns [len(eta_steps) + 1] (0 at step 0)."""
    return np.concatenate([[0.0], 2 * L ** 2 / n * np.cumsum(np.asarray(eta_steps, float))])


def nonconvex(T, n, L, beta, c, U=1.0):
    """Thm 3.12 (U = 1) and its bounded-loss generalisation (see module doc). ``T`` = number of SGD steps."""
    q = beta * c
    T = np.asarray(T, float)
    t0 = (2 * c * L ** 2 / U) ** (1 / (q + 1)) * T ** (q / (q + 1))
    return (U * t0 + 2 * L ** 2 / beta * (T / t0) ** q) / (n - 1)


def nonconvex_paper(T, n, L, beta, c):
    """Thm 3.12 exactly as printed."""
    q = beta * c
    return (1 + 1 / q) / (n - 1) * (2 * c * L ** 2) ** (1 / (q + 1)) * np.asarray(T, float) ** (q / (q + 1))


def _steps(st: Setting):
    lr = st.round_lrs() * float(st.global_lr)
    return np.repeat(lr, st.K)


@register("fedavg", name="hardt.sgd")
def hardt_registered(st: Setting) -> list:
    """Single-machine SGD reference at round boundaries t = 0..T (steps tK): convex (Thm 3.8), non-convex (3.12)."""
    eta = _steps(st)
    L, beta, n = st.const("G"), st.const("L"), st.M * st.n
    j = np.arange(1, len(eta) + 1)
    c = float(np.max(j * eta))
    note = "single-machine SGD reference (Hardt et al. 2016), not an FL bound"
    cv = convex(eta, L, n)[:: st.K]
    out = [Bound("hardt.sgd", st.algo, "gen_gap", "convex", f"{SRC} Thm 3.8", cv,
                 conditions={"loss convex (constants['convex'])": bool(st.constants.get("convex", False)),
                             "eta_j <= 2/beta": bool(np.all(eta <= 2 / beta))}, note=note)]
    U = float(st.constants.get("U") or 1.0)
    steps = np.arange(st.T + 1, dtype=float) * st.K
    with np.errstate(divide="ignore", invalid="ignore"):
        nc = nonconvex(steps, n, L, beta, c, U)
    nc[0] = 0.0
    out.append(Bound("hardt.sgd", st.algo, "gen_gap", "nonconvex", f"{SRC} Thm 3.12", nc,
                     conditions={"eta_j <= c/j": True, "loss bounded by U (U = constants['U'] or 1)": True},
                     derived={"c": c, "U": U}, note=note))
    return out
