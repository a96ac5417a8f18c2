"""Growth assertions: what a discrepancy curve does over rounds, for users' own pytest suites.

Each takes a run directory, a ``load_run`` DataFrame, or an array [pairs, T+1] (one curve [T+1] is one
pair) over rounds 0..T, and raises ``AssertionError`` with the measured numbers, which condition failed
and the fit table of the mean curve (law, params, R², BIC), so a failing CI job says what the curve did:

    from stabkit.testing import assert_saturates
    def test_weight_decay_levels_off():
        assert_saturates("runs/fedavg_wd")

Margins are in standard errors over pairs (sample std / sqrt(pairs)); with a single pair there is no
standard error and the margin is zero.
"""
from __future__ import annotations

import numpy as np

from stabkit.analysis.fits import ALL, curves_from, fit_growth


def _mean_se(curves: np.ndarray, i: int) -> tuple[float, float]:
    """Mean and standard error over pairs of the discrepancy at column ``i``."""
    v = curves[:, i]
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v))) if len(v) > 1 else 0.0


def _fail(title: str, checks: list[tuple[bool, str]], t, curves) -> None:
    """Raise unless every check holds; the message lists all checks, then the fit table."""
    if all(ok for ok, _ in checks):
        return
    lines = [title] + [f"  [{'ok' if ok else 'FAILED'}] {text}" for ok, text in checks]
    fit = fit_growth(t, curves, laws=ALL, bootstrap=0)
    lines += [f"fits of the mean curve ({len(curves)} pairs, rounds {t[0]:g}..{t[-1]:g}):", fit.table()]
    raise AssertionError("\n".join(lines))


def assert_saturates(run, tol: float = 0.1, window: float = 0.5) -> None:
    """The mean curve levels off: over the last ``window`` fraction of rounds it changes by less than
    ``tol`` relative to its final value, AND the saturating law beats the linear one by BIC."""
    t, curves = curves_from(run)
    m = curves.mean(axis=0)
    i = int(np.searchsorted(t, t[-1] - window * (t[-1] - t[0])))
    change = abs(m[-1] - m[i]) / abs(m[-1]) if m[-1] != 0 else (0.0 if m[i] == 0 else np.inf)
    fit = fit_growth(t, curves, laws=("linear", "saturating"), bootstrap=0)
    d_bic = fit.fits["saturating"].bic - fit.fits["linear"].bic
    _fail("assert_saturates: the mean discrepancy does not level off", [
        (change < tol, f"relative change over rounds {t[i]:g}..{t[-1]:g}: |D_{t[-1]:g} - D_{t[i]:g}| / "
                       f"D_{t[-1]:g} = |{m[-1]:.4g} - {m[i]:.4g}| / {m[-1]:.4g} = {change:.4g} (needs < {tol:g})"),
        (d_bic < 0, f"BIC(saturating) - BIC(linear) = {d_bic:.2f} (needs < 0)"),
    ], t, curves)


def assert_grows(run, min_ratio: float = 1.15, margin_se: float = 3.0) -> None:
    """D_T >= min_ratio * D_{T/2} with a margin: the per-pair excess D_T - min_ratio*D_{T/2} has a mean
    above ``margin_se`` standard errors (the ratio of means is reported alongside)."""
    t, curves = curves_from(run)
    i = int(np.argmin(np.abs(t - (t[0] + t[-1]) / 2.0)))
    excess = curves[:, -1] - min_ratio * curves[:, i]
    e_mean, e_se = _mean_se(excess[:, None], 0)
    m_half, m_end = curves[:, i].mean(), curves[:, -1].mean()
    ratio = m_end / m_half if m_half != 0 else np.inf * np.sign(m_end)
    _fail("assert_grows: the mean discrepancy does not keep growing", [
        (e_mean > margin_se * e_se,
         f"D_{t[-1]:g} / D_{t[i]:g} = {m_end:.4g} / {m_half:.4g} = {ratio:.4g} (needs >= {min_ratio:g}); "
         f"excess D_{t[-1]:g} - {min_ratio:g}*D_{t[i]:g} = {e_mean:.4g} ± {e_se:.3g} (se), "
         f"needs > {margin_se:g} se = {margin_se * e_se:.4g}"),
    ], t, curves)


def assert_grows_linearly(run, bic_tol: float = 2.0, p_range: tuple[float, float] = (0.8, 1.2)) -> None:
    """The linear law is the BIC-best law or within ``bic_tol`` of it, AND the power law's exponent p
    lies in ``p_range``."""
    t, curves = curves_from(run)
    fit = fit_growth(t, curves, laws=ALL, bootstrap=0)
    d_bic, p = fit.delta_bic["linear"], fit.fits["power"].params["p"]
    _fail("assert_grows_linearly: the mean discrepancy does not grow linearly", [
        (d_bic <= bic_tol, f"BIC(linear) - min BIC = {d_bic:.2f} (needs <= {bic_tol:g}; best law: {fit.best})"),
        (p_range[0] <= p <= p_range[1], f"power-law exponent p = {p:.4g} (needs in [{p_range[0]:g}, {p_range[1]:g}])"),
    ], t, curves)


def assert_below(run, other_run, at=None, margin_se: float = 3.0) -> None:
    """The mean discrepancy of ``run`` at round ``at`` (default: the last round of ``run``) lies below
    ``other_run``'s by more than ``margin_se`` standard errors of the difference (independent pairs)."""
    t, curves = curves_from(run)
    t_o, curves_o = curves_from(other_run)
    at = t[-1] if at is None else at
    if at not in t or at not in t_o:
        raise ValueError(f"round at={at!r} is not in both runs (rounds up to {t[-1]:g} and {t_o[-1]:g})")
    m, se = _mean_se(curves, int(np.flatnonzero(t == at)[0]))
    m_o, se_o = _mean_se(curves_o, int(np.flatnonzero(t_o == at)[0]))
    diff, se_d = m_o - m, float(np.hypot(se, se_o))
    _fail(f"assert_below: the discrepancy at round {at:g} is not below the other run's", [
        (diff > margin_se * se_d,
         f"D_{at:g} = {m:.4g} ± {se:.3g} (se) vs other {m_o:.4g} ± {se_o:.3g}: difference {diff:.4g} "
         f"± {se_d:.3g}, needs > {margin_se:g} se = {margin_se * se_d:.4g}"),
    ], t, curves)
