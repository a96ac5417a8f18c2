"""Hold a paired run against the papers: growth-law fits, instantiated bounds, tightness, Libra's excess risk.

``analyze(run)`` reads ``config.json``, ``constants.json``, ``privacy.json``, ``metrics.csv`` and ``local.csv`` of
a run written by ``stabkit pair`` (through its :class:`~stabkit.store.rundir.RunDir`, whose readings a caller that
read the run already shares) and returns an :class:`Analysis`: the fitted growth laws of the discrepancy
(and of the local discrepancy vs k), every bound registered for the run's algorithm instantiated with the
run's schedule and estimated constants (with validity flags), the tightness bound/measured, and Libra's
excess-risk dynamics (Corollary 1 on the measured s_t = E||x_t - x'_t||^2 and g_t = ||grad f(x_t)||^2)
with its minimum round T* and fitting regime, next to the round where the measured test loss is minimal.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd

from stabkit import plugins
from stabkit.algorithms.flower import is_flower
from stabkit.algorithms.variant import split_variant
from stabkit.analysis.bounds import Bound, Setting, bounds_for
from stabkit.analysis.bounds.libra import excess_risk_dynamics
from stabkit.analysis.excess_risk import fit_excess_risk, fitting_regime, minimum_excess_risk_round
from stabkit.analysis.fits import MIN_POINTS, GrowthFit, TooFewPoints, fit_growth, fit_local, local_curves, tightness
from stabkit.config.runconfig import REMOVALS, RunConfig
from stabkit.errors import ConfigError
from stabkit.store.rundir import APP_KEY, FLOWER_APP, RunDir


def _per_round(df: pd.DataFrame, column: str, how: str = "mean") -> np.ndarray:
    """Mean (or max) over pairs per round, linearly interpolated over rounds without evaluation."""
    if column not in df:
        return None
    series = getattr(df.groupby("round")[column], how)()
    series = series.reindex(range(int(df["round"].max()) + 1))
    return series.interpolate(limit_area="inside").to_numpy(dtype=float)


def _both(df, name, how="mean"):
    a, b = _per_round(df, f"{name}_a", how), _per_round(df, f"{name}_b", how)
    return None if a is None else (a + b) / 2


def _bound_key(algo: str) -> str:
    """The name the run's bounds are registered under: a built-in's ``--algo`` name (a variant's base:
    ``fedprox[lam=0.1]`` has FedProx's bounds, evaluated at its resolved hyperparameters), or a plug-in's class
    ``name`` (importing a plug-in registers the bounds its module defines)."""
    algo = split_variant(algo)[0]
    if is_flower(algo):  # a Flower strategy: no paper's bound is registered for it (its own name, not imported)
        return algo
    if plugins.is_import_path(algo) or algo in plugins.installed("algo"):
        return getattr(plugins.load("algo", algo), "name", algo)
    return algo


def setting_from_run(df: pd.DataFrame, constants: dict) -> Setting:
    """The bound evaluator's view of a run: schedule, hyperparameters, constants, mean-over-pairs curves.

    The hyperparameters are the run's resolved ones (``config.json``'s ``hp_resolved``: every default filled
    in), so the bounds use exactly the values the run used."""
    recorded = df.attrs["config"]
    T = int(df["round"].max())
    if APP_KEY in recorded:  # a whole Flower app: its own training, only its discrepancy is measured
        return Setting(algo=f"{APP_KEY}:{recorded[APP_KEY]}", hp={}, K=0, T=T, s=int(recorded["clients_per_round"]),
                       M=int(recorded["partitions"]), n=1, b=1, lr=np.zeros(T),
                       measured={"disc": _per_round(df, "disc"), "disc_sq": _per_round(df, "disc_sq")})
    cfg = RunConfig.from_dict(recorded)
    n = int(recorded.get("n_min") or 1)
    measured = {"disc": _per_round(df, "disc"), "disc_sq": _per_round(df, "disc_sq"),
                "grad_norm_sq": _both(df, "grad_norm_sq"), "train_loss": _both(df, "train_loss"),
                "test_loss": _both(df, "test_loss"), "gap": _both(df, "gap")}
    if "theta_max" in df:
        measured["theta_t"] = _per_round(df, "theta_max", "max")
    for col in df:
        if col.startswith("norm_") and col.endswith("_a"):
            name = col[len("norm_"):-2]
            measured[f"state_norm_sum/{name}"] = _per_round(df, f"norm_{name}_a") + _per_round(df, f"norm_{name}_b")
    return Setting(algo=_bound_key(cfg.algo), hp=dict(recorded["hp_resolved"]), K=cfg.local_steps, T=T, s=cfg.sampled_clients,
                   M=cfg.task_options.clients, n=n, b=n if cfg.batch_size == "full" else int(cfg.batch_size),
                   lr=cfg.client_lr(np.arange(T)), global_lr=cfg.global_lr, weight_decay=cfg.weight_decay,
                   constants=dict(constants), measured=measured)


@dataclass
class Analysis:
    """Everything ``stabkit bounds`` reports about one run."""

    path: Path
    df: pd.DataFrame
    setting: Setting
    fit: Optional[GrowthFit]  # None: the curve is too short to fit (the reason is in ``missing``)
    bounds: list
    local_fits: dict = field(default_factory=dict)  # round -> GrowthFit of L1 curves vs k (rounds too short: absent)
    local: Optional[pd.DataFrame] = None
    libra: dict = field(default_factory=dict)
    missing: dict = field(default_factory=dict)  # part not computed ("growth fit", "local fit", ...) -> reason
    label: str = ""  # the legend label (``stabkit.analysis.labels``); default: config.json's label or the algorithm

    def __post_init__(self):
        config = self.df.attrs.get("config", {}) if self.df is not None else {}
        self.label = self.label or config.get("label") or self.setting.algo

    def curves(self) -> np.ndarray:
        """Discrepancy ``[pairs, T + 1]``."""
        return self.df.pivot(index="pair", columns="round", values="disc").to_numpy(dtype=float)

    def global_bounds(self) -> list:
        return [b for b in self.bounds if b.quantity == "disc" and np.isfinite(b.values).any()]

    def measured_for(self, quantity: str):
        """The measured curve a bound on ``quantity`` is compared with (None if not measured per round)."""
        m = self.setting.measured
        if quantity in ("disc", "disc_sq"):
            return m[quantity]
        if quantity == "gen_gap":
            return np.abs(m["gap"])
        if quantity == "excess_risk":
            return m["test_loss"] - self.setting.constants.get("f_star", np.nan)
        return None

    def bound_rows(self) -> list:
        """One row per bound on a measured per-round quantity: validity, failed conditions, final value,
        tightness (bound / measured) and whether it holds. ``holds`` is decided on the rounds t >= 1 where
        the bound is defined (finite) and the quantity measured; ``undefined`` counts the measured rounds
        where it is NaN or inf and ``undefined_cause`` says why (None: defined everywhere). A bound defined
        at no round has ``holds`` None: a reported failure, never a silent row."""
        rows = []
        for b in self.bounds:
            measured = self.measured_for(b.quantity)
            if measured is None or len(b.values) != len(measured):
                continue
            ratio = tightness(b.values, measured)
            ok = np.isfinite(measured[1:])
            defined = ok & np.isfinite(b.values[1:])
            holds = bool(np.all(b.values[1:][defined] >= measured[1:][defined] * (1 - 1e-9))) if defined.any() else None
            with np.errstate(all="ignore"):
                median = float(np.nanmedian(ratio[1:])) if np.isfinite(ratio[1:]).any() else float("nan")
            rows.append({"run": str(self.path), "algo": self.setting.algo, "bound": b.name, "quantity": b.quantity,
                         "form": b.form, "source": b.source, "valid": b.valid, "failed": "; ".join(b.failed),
                         "bound_T": float(b.values[-1]), "measured_T": float(measured[-1]),
                         "tightness_T": float(ratio[-1]), "tightness_median": median, "holds": holds,
                         "undefined": int(ok.sum() - defined.sum()), "undefined_cause": undefined_cause(b)})
        return rows

    def summary_row(self) -> dict:
        """The fit-table row: measured levels, best law with CIs, fitted rate vs predicted, Libra T*."""
        curves = self.curves()
        final = curves[:, -1]
        row = {"run": str(self.path), "label": self.label, "algo": self.setting.algo,
               "perturb": self.df.attrs["config"]["perturb"], "T": self.setting.T, "pairs": curves.shape[0],
               "D_T": float(final.mean()), "D_T_std": float(final.std()),
               "best_law": self.fit.best if self.fit else None}
        nan, no_ci = float("nan"), (float("nan"), float("nan"))
        (c, c_lo, c_hi), (rho, rho_lo, rho_hi), (p, p_lo, p_hi) = (
            (self.fit.param(law, name) if self.fit else (nan, *no_ci))
            for law, name in (("saturating", "c"), ("saturating", "rho"), ("power", "p")))
        for law, f in (self.fit.fits.items() if self.fit else ()):
            row[f"{law}.r2"] = f.r2
            row[f"{law}.dbic"] = self.fit.delta_bic[law]
        row.update({"sat.level": c, "sat.level.ci": (c_lo, c_hi), "sat.rho": rho, "sat.rho.ci": (rho_lo, rho_hi),
                    "power.p": p, "power.p.ci": (p_lo, p_hi)})
        # the predicted contraction rate and plateau: FedSAGD's theorem form, else any form that has them
        ranked = sorted((b for b in self.bounds if "Gamma" in b.derived), key=lambda b: b.form != "theorem")
        predicted = ranked[0].derived if ranked else None
        if predicted is not None:
            row["Gamma"] = float(predicted["Gamma"])
            row["rho/Gamma"] = rho / row["Gamma"] if row["Gamma"] > 0 else float("nan")
            asym = predicted.get("asymptote")
            row["predicted_level"] = float(asym) if asym is not None else float("nan")
        valid = [r for r in self.bound_rows() if r["valid"] and r["quantity"] == "disc"]
        row["valid_bounds"] = len(valid)
        row["tightest_valid"] = min((r["tightness_T"] for r in valid), default=float("nan"))
        if self.libra:
            row.update({k: self.libra[k] for k in ("T_star", "regime", "fit_degenerate", "T_star_fit", "regime_fit",
                                                   "phi1", "phi1.ci", "phi2", "phi2.ci", "test_loss_argmin")})
        row["missing"] = "; ".join(f"{part}: {why}" for part, why in self.missing.items())
        return row


def undefined_cause(b: Bound):
    """Why a bound is NaN/inf at some rounds (None if it is finite everywhere): the first round it overflows
    to inf and the first NaN (an inf·0 or inf − inf in the recursion after the overflow), or a missing input."""
    v = np.asarray(b.values, float)
    inf, nan = np.flatnonzero(np.isinf(v)), np.flatnonzero(np.isnan(v))
    if not len(inf) and not len(nan):
        return None
    if len(nan) == len(v):
        return "NaN at every round" + (f": {b.note}" if b.note else " (an input constant or curve is NaN)")
    parts = []
    if len(inf):
        parts.append(f"overflows to inf from t = {inf[0]} (the recursion exceeds the float range; vacuous there)")
    if len(nan):
        after = " after the overflow (inf·0 or inf − inf)" if len(inf) and inf[0] < nan[0] else ""
        parts.append(f"NaN from t = {nan[0]}{after}")
    return "; ".join(parts)


def _libra(setting: Setting) -> dict:
    """Libra's excess-risk dynamics on the measured curves s_t = E||x_t - x'_t||^2 and g_t = ||grad f||^2.

    ``T_star`` / ``regime``: Corollary 1 (gamma-optimised) with the estimated L and C = 1/(2 mu_PL);
    ``T_star_fit``: the fit (Corollary 1's shape) of the measured excess-risk proxy e_t = test loss - min f by
    phi1 s_t + phi2 g_t (phi >= 0), whose argmin estimates T* with free constants -- None when the fit is
    degenerate (``fit_degenerate``: a phi on its bound 0, e.g. phi1 = 0 leaves the stability term unidentified
    and the "T*" would be the minimum of the gradient-norm curve alone); ``phi1.ci``/``phi2.ci`` are the
    unconstrained 95% intervals; ``test_loss_argmin`` is where the measured test loss is minimal.
    """
    m, c = setting.measured, setting.constants
    s_t, g_t, test = m.get("disc_sq"), m.get("grad_norm_sq"), m.get("test_loss")
    if g_t is None or not c.get("L") or not c.get("mu_pl"):
        return {}
    C = 1.0 / (2.0 * c["mu_pl"])
    dyn = excess_risk_dynamics(s_t, g_t, c["L"], C)
    fit = fit_excess_risk(test - c["f_star"], s_t, g_t, start=1)
    return {"L": c["L"], "C": C, **dyn, "T_star": minimum_excess_risk_round(dyn["total"], start=1),
            "regime": fitting_regime(dyn["total"], start=1), "T_star_fit": fit["T_star"],
            "phi1": fit["phi1"], "phi2": fit["phi2"], "phi1.ci": fit["phi1.ci"], "phi2.ci": fit["phi2.ci"],
            "fit_degenerate": fit["degenerate"], "fit_on_bound": fit["on_bound"], "fitted": fit["fitted"],
            "regime_fit": None if fit["degenerate"] else fitting_regime(fit["fitted"], start=1),
            "test_loss": test, "test_loss_argmin": int(np.nanargmin(test))}


def _too_short(what: str, points: int, unit: str) -> str:
    return f"not made: {what} gives {points} points ({unit}), a growth-law fit needs at least {MIN_POINTS}"


# Every bound stabkit evaluates is proved for neighbours that differ by one *replaced* client or sample (FedSAGD
# Def. 3.4, FedInit's and FedSWA's client replacement, Libra Def. 2, Hardt et al.'s S, S' differing in one example);
# none of the printed proofs covers a removal, and a replace-one bound does not bound a remove-one discrepancy
# (replacing is removing and adding: it is the larger of the two), so on a removal run each is shown as failed.
REMOVAL_NOT_COVERED = "neighbours as in the printed proof (one client or sample replaced; removal is not covered)"


def analyze(run, bootstrap: int = 200, label: str = "") -> Analysis:
    """Fits, bounds and Libra's excess risk for the run ``run`` (a directory path or a RunDir).

    A curve too short to fit (a run of 1-2 rounds or diverged early, K + 1 <= 3 local points) leaves that
    fit out and names it in ``Analysis.missing``; everything else is still computed. ``label``: the legend
    label (default: config.json's ``label``, else the algorithm).
    """
    run = RunDir.of(run)
    df, constants = _finite_rounds(run)
    setting = setting_from_run(df, constants)
    if run.privacy is not None:  # a DP run: its schedule, for the DP => stability bound
        setting.privacy = dict(run.privacy)
    rounds = np.arange(setting.T + 1)
    curves = df.pivot(index="pair", columns="round", values="disc").to_numpy(dtype=float)
    seed, missing, fit = df.attrs["config"]["seed"], {}, None
    summary = df.attrs.get("summary") or {}
    why = f" (diverged at round {summary['diverged_round']})" if summary.get("diverged_round") else ""
    try:
        fit = fit_growth(rounds, curves, bootstrap=bootstrap, seed=seed)
    except TooFewPoints:
        missing["growth fit"] = _too_short(f"T = {setting.T}{why}", setting.T + 1, "rounds 0..T")
    bounds, libra = [], {}
    if run.kind == FLOWER_APP:
        missing["bounds"] = ("not computed: a Flower app trains its clients with its own code, and the papers' "
                             "bounds are stated for the local rule and constants of a stabkit run")
    elif setting.T >= 1:
        bounds, libra = bounds_for(setting), _libra(setting)
        if df.attrs["config"]["perturb"] in REMOVALS:  # every printed proof is for replace-one neighbours
            for b in bounds:
                b.conditions[REMOVAL_NOT_COVERED] = False
    else:
        missing["bounds"] = f"not computed: no round after round 0{why}"
    local, local_fits = _local_fits(run, bootstrap, seed, missing)
    return Analysis(run.path, df, setting, fit, bounds, local_fits, local, libra, missing, label)


def _finite_rounds(run: RunDir) -> tuple:
    """``(df, constants)``: the run's metrics up to its last round at which every pair is finite (and below
    the overflow threshold), and its constants.json ({} without one); one-line errors for what is missing."""
    path, df = run.path, run.metrics()
    if "config" not in df.attrs:
        raise ConfigError(f"invalid run={str(path)!r}: config.json is missing")
    if "hp_resolved" not in df.attrs["config"] and APP_KEY not in df.attrs["config"]:
        raise ConfigError(f"invalid run={str(path)!r}: its config.json has no hp_resolved (written before runs "
                          f"recorded their resolved hyperparameters); rerun it with `stabkit pair --config "
                          f"{run.file(RunDir.CONFIG)} --out NEW_DIR`")
    if df.empty:
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv holds no round, only its header (the run "
                          f"stopped before round 0 was logged; rerun it)")
    constants = dict(run.constants or {})
    # rounds at which every pair is finite (a run stops at its first non-finite round)
    finite = df.groupby("round")["disc"].apply(lambda d: bool(np.isfinite(d).all()))
    last = int(finite.index[~finite.to_numpy()].min()) - 1 if not finite.all() else int(finite.index.max())
    diverged = (df.attrs.get("summary") or {}).get("diverged_round")
    last = min(last, int(diverged) - 1) if isinstance(diverged, int) else last  # above the overflow threshold
    if last < 0:
        raise ConfigError(f"invalid run={str(path)!r}: metrics.csv has no finite discrepancy, not even at round 0")
    return df[df["round"] <= last], constants


def _local_fits(run: RunDir, bootstrap: int, seed: int, missing: dict) -> tuple:
    """``(local, {round: fit})``: local.csv and the growth fit of L1 over the local steps of each logged round
    (None, {} without local.csv); a round diverging inside is fitted on its finite steps; a round too short
    to fit is named in ``missing``."""
    local, local_fits = run.local(), {}
    if local is not None:
        for r in sorted(local["round"].unique()):
            k, lc = local_curves(local, column="l1_a", rounds=[r])
            bad = np.flatnonzero(~np.isfinite(lc).all(axis=0))  # a run diverging inside the round: its finite steps
            k, lc = (k[:bad[0]], lc[:, :bad[0]]) if len(bad) else (k, lc)
            steps = f"K = {len(k) - 1} local steps" + (f" (non-finite from step {bad[0]} of round {r})" if len(bad)
                                                       else "")
            try:
                local_fits[int(r)] = fit_local(k, lc, bootstrap=bootstrap, seed=seed)
            except TooFewPoints:
                missing["local fit"] = _too_short(steps, len(k), "k = 0..K")
    return local, local_fits


__all__ = ["Analysis", "Bound", "analyze", "setting_from_run"]
