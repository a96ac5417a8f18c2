"""A stability bound for FedYogi, registered with stabkit (``stabkit bounds`` evaluates it on fedyogi runs).

Both trajectories take line 8 of the algorithm, x_{t+1} = x_t + eta m_t / (sqrt(v_t) + tau), and Yogi keeps
v_t >= 0, so each step has norm at most eta ||m_t|| / tau and, by the triangle inequality,

    D_{t+1} <= D_t + (eta / tau) (||m_t|| + ||m'_t||)                                  (measured form)

m_t is a convex combination of Delta_0..Delta_t (weights (1 - beta1) beta1^(t-s), m_{-1} = 0), and a plain
SGD client moves at most K eta_l Theta per round (Theta = max raw minibatch-gradient norm; holds without
weight decay, clipping only shortens steps), so ||m_t|| <= K max_{s<=t} eta_l,s Theta and

    D_{t+1} <= D_t + 2 (eta / tau) K max_{s<=t} eta_l,s Theta_max                     (constant form)

closed form for a constant lr: D_T <= 2 eta K eta_l Theta_max T / tau. Loose by design (1/tau = 1000): the
point is a bound that provably holds, evaluated on the run's measured m and estimated Theta.
"""
import numpy as np

from stabkit.analysis.bounds import Bound, iterate, register

SOURCE = "stabkit_fedyogi.bound (triangle inequality on Reddi et al. 2021, Alg. 2, line 8)"


@register("fedyogi", name="fedyogi.step_norm")
def from_measured_m(st) -> Bound:
    """The measured form: reads ||m_t|| + ||m'_t|| of the run (index 0..T, m after round t)."""
    eta, tau = st.global_lr, st.hp["tau"]
    values = iterate(1.0, eta / tau * st.measured["state_norm_sum/m"][1:])
    return Bound("fedyogi.step_norm", st.algo, "disc", "measured", SOURCE, values,
                 conditions={"v_t >= 0 (Yogi keeps it from v_init = tau^2)": True})


@register("fedyogi", name="fedyogi.step_norm_theta")
def from_theta(st) -> Bound:
    """The constant form: reads the estimated Theta_max (a missing constant is reported, not an error)."""
    eta, tau, K, theta = st.global_lr, st.hp["tau"], st.K, st.const("theta_max")
    lr = np.asarray(st.lr, float)[: st.T]
    values = iterate(1.0, 2 * eta / tau * K * np.maximum.accumulate(lr) * theta)
    closed = 2 * eta * K * lr[0] * theta * np.arange(st.T + 1) / tau if np.all(lr == lr[0]) else None
    return Bound("fedyogi.step_norm_theta", st.algo, "disc", "constants", SOURCE, values, closed_form=closed,
                 conditions={"no weight decay (||Delta_t|| <= K eta_l Theta)": st.weight_decay == 0})
