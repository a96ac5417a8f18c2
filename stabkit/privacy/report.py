"""What ``stabkit privacy RUN`` reports: the sandwich epsilon_audit <= epsilon_measured <= epsilon_accountant of a
DP run at a chosen delta, the DP => stability bound e^epsilon - 1 + delta, and the quantities it concerns.

The accountant's and the measured epsilons are recomputed at ``delta`` from the run's ``privacy.json`` schedule
and its ``dp_sensitivity`` column; the audit's lower bound comes from an audit folder (``stabkit audit``) of the
same algorithm and schedule. ``privacy.json`` is not trusted on its own: its schedule must have the rounds the
metrics logged and the clip, noise multiplier, clients and clients per round the run's ``config.json`` implies
(given by the caller: ``stabkit.run.privacy_facts``), and its measured sensitivities must be finite and >= 0,
else the file is reported as damaged with its path. Beside D_T (the coupled discrepancy) it gives the mean over pairs of the final loss
difference of the two runs, the difference of expectations the DP => stability bound concerns: meaningful as such
for decoupled runs (``--dp-noise independent``), whose two runs draw their own noise.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np

from stabkit.errors import ConfigError
from stabkit.privacy.accountant import Schedule, check_delta, epsilons
from stabkit.privacy.runfile import measured_epsilons
from stabkit.store.rundir import RunDir, read_json

AUDIT_FILE = "audit.json"
NO_NOISE = "this run adds no noise: epsilon = infinity"


def _final_mean(df, column: str) -> Optional[float]:
    last = df[df["round"] == df["round"].max()]
    return float(last[column].mean()) if column in last and last[column].notna().any() else None


def _loss_difference(df) -> Optional[float]:
    """Mean over pairs of the final test-loss difference B - A (None where the run logged no test loss)."""
    last = df[df["round"] == df["round"].max()]
    if "test_loss_a" not in last or last["test_loss_a"].isna().all():
        return None
    return float((last["test_loss_b"] - last["test_loss_a"]).mean())


def check_new_audit_dir(out) -> None:
    """``out`` can take a new audit: writable, and not holding one (an audit is never silently replaced)."""
    from stabkit.store.outdir import check_writable

    check_writable(out)
    if (Path(out) / AUDIT_FILE).exists():
        raise ConfigError(f"invalid out={str(out)!r}: it already holds an audit ({Path(out) / AUDIT_FILE}); give a "
                          "new folder, or remove that file to replace it")


def read_audit(audit_dir, delta: float, schedule: Schedule) -> dict:
    """An audit folder's record, refused (one line) without one, at another delta or of another schedule."""
    path = Path(audit_dir) / AUDIT_FILE
    if not path.is_file():
        raise ConfigError(f"invalid audit={str(audit_dir)!r}: expected a folder written by `stabkit audit` "
                          f"(with {AUDIT_FILE})")
    record = read_json(path, "audit")
    if not math.isclose(record["delta"], delta, rel_tol=1e-12):
        raise ConfigError(f"invalid delta={delta!r}: the audit in {audit_dir} bounds epsilon at delta="
                          f"{record['delta']!r}; pass --delta {record['delta']!r}")
    audited = Schedule.from_dict(record["schedule"])
    if audited != schedule:
        raise ConfigError(f"invalid audit={str(audit_dir)!r}: it audits {audited}, this run is {schedule}; "
                          f"audit the run's own schedule")
    return record


def checked_schedule(run_dir: Path, recorded: dict, df, implied: Optional[dict] = None) -> Schedule:
    """``privacy.json``'s schedule, after checking it against the rounds the metrics logged, what the run's
    config implies (``implied``: clients, sampled, clip, noise_multiplier, from
    :func:`stabkit.run.privacy_facts.implied_schedule`) and the logged sensitivities; one line naming the file
    and the first field that disagrees."""
    where = f"invalid run={str(run_dir)!r}: {RunDir(run_dir).file(RunDir.PRIVACY)} is damaged"
    try:
        schedule = Schedule.from_dict(recorded["schedule"])
    except (KeyError, TypeError) as e:
        raise ConfigError(f"{where}: its schedule lacks {e}; restore it or rerun the run") from None
    expected = {"rounds": int(df["round"].max()), **(implied or {})}
    for key, want in expected.items():
        got = getattr(schedule, key)
        if not math.isclose(float(got), float(want), rel_tol=1e-12):
            raise ConfigError(f"{where}: its {key} is {got!r}, but config.json and metrics.csv give {want!r}; "
                              "restore it or rerun the run")
    if "dp_sensitivity" in df:
        s = df["dp_sensitivity"].to_numpy(dtype=float)
        bad = s[np.isinf(s) | (s < 0)]  # NaN: a round not measured
        if len(bad):
            raise ConfigError(f"invalid run={str(run_dir)!r}: its metrics.csv is damaged: a dp_sensitivity of "
                              f"{float(bad[0])!r} (a measured sensitivity is a norm: finite and >= 0)")
    return schedule


def privacy_report(run_dir, delta: float, audit_dir=None, implied: Optional[dict] = None) -> dict:
    """The report of the DP run in ``run_dir`` (a path or a RunDir) at ``delta`` (with the audit of ``audit_dir``
    when given); ``implied``: the schedule's fields its config.json implies, which privacy.json must match
    (:func:`stabkit.run.privacy_facts.implied_schedule`)."""
    delta = check_delta(delta)
    run = RunDir.of(run_dir)
    run_dir, df, recorded = run.path, run.metrics(), run.privacy
    if recorded is None:
        raise ConfigError(f"invalid run={str(run_dir)!r}: {NO_NOISE} (it has no DP layer: run --algo dp_fedavg "
                          f"or --wrap dp:clip=...,noise_multiplier=...)")
    schedule = checked_schedule(run_dir, recorded, df, implied)
    audit = read_audit(audit_dir, delta, schedule) if audit_dir is not None else None
    accountant = epsilons(schedule, delta)
    measured = measured_epsilons(schedule, df, delta) if schedule.noise_multiplier else []
    per_pair = [m["epsilon"] for m in measured] or [math.inf]
    return {"epsilon_accountant": accountant["epsilon"], "epsilon_measured": max(per_pair),
            "epsilon_audit_lower": audit["epsilon_lower"] if audit else None, "delta": delta,
            "accountant": accountant, "epsilon_measured_per_pair": per_pair,
            "audit": audit and {k: audit[k] for k in ("epsilon_lower", "epsilon_point", "fpr", "fnr", "fpr_upper",
                                                       "fnr_upper", "trials", "statistic")},
            "dp_stability_bound": math.expm1(accountant["epsilon"]) + delta, "dp_noise": recorded["dp_noise"],
            "D_T": _final_mean(df, "disc"), "loss_difference": _loss_difference(df),
            "schedule": schedule.to_dict(), "run": str(run_dir)}


def report_text(r: dict) -> str:
    """The report as lines of text."""
    s, acc = r["schedule"], r["accountant"]
    lines = [f"== {r['run']}: clip C = {s['clip']:g}, noise multiplier z = {s['noise_multiplier']:g} (std z C / s = "
             f"{s['noise_std']:.4g}), T = {s['rounds']}, s = {s['sampled']} of M = {s['clients']}, noise "
             f"{r['dp_noise']}",
             f"neighbours: {s['relation']}; sampling: {s['sampling']}",
             f"epsilon at delta = {r['delta']:g}:",
             f"  accountant  {acc['epsilon']:.4g}  (RDP {acc['rdp']:.4g}, PLD {acc['pld']:.4g}; tightest: "
             f"{acc['accountant']})",
             f"  measured    {r['epsilon_measured']:.4g}  (per pair {_range(r['epsilon_measured_per_pair'])})"]
    if r["audit"]:
        a = r["audit"]
        lines.append(f"  audit       >= {a['epsilon_lower']:.4g}  ({a['trials']} trials: FPR {a['fpr']:.4g} <= "
                     f"{a['fpr_upper']:.4g}, FNR {a['fnr']:.4g} <= {a['fnr_upper']:.4g}; the rates seen give "
                     f"{a['epsilon_point']:.4g})")
    lines.append(f"DP => stability (Wang, Lei & Fienberg 2016, losses in [0, 1]): |E gen gap| <= e^eps - 1 + delta "
                 f"= {r['dp_stability_bound']:.4g}")
    diff = "n/a" if r["loss_difference"] is None else f"{r['loss_difference']:.4g}"
    lines.append(f"D_T = {r['D_T']:.4g} (mean over pairs); mean final test-loss difference B - A = {diff}"
                 + ("" if r["dp_noise"] == "independent" else " (coupled noise: the runs share their noise)"))
    return "\n".join(lines)


def _range(values) -> str:
    return f"{min(values):.4g} .. {max(values):.4g}" if len(values) > 1 else f"{values[0]:.4g}"


def plot_sandwich(r: dict, out: Path) -> list:
    """The sandwich as a figure on one epsilon axis: the audit's interval (from its lower bound to the estimate of
    the rates seen), the measured epsilon per pair, the RDP and PLD accountants."""
    from stabkit.plotting import colors, plt, save

    fig, ax = plt.subplots(figsize=(6.0, 2.6))
    rows = [("measured (pairs)", r["epsilon_measured_per_pair"]), ("accountant (PLD)", [r["accountant"]["pld"]]),
            ("accountant (RDP)", [r["accountant"]["rdp"]])]
    if r["audit"]:
        rows.insert(0, ("audit (lower bound .. rates seen)", [r["audit"]["epsilon_lower"], r["audit"]["epsilon_point"]]))
    for y, ((name, values), color) in enumerate(zip(rows, colors(len(rows)))):
        finite = [v for v in values if math.isfinite(v)]
        ax.plot(finite, np.full(len(finite), y), "o", ms=5, color=color)
        if len(finite) > 1:
            ax.hlines(y, min(finite), max(finite), lw=2, color=color)
    ax.set_yticks(range(len(rows)), [name for name, _ in rows])
    ax.set_xlabel(f"epsilon at delta = {r['delta']:g}")
    ax.set_title("epsilon_audit <= epsilon_measured <= epsilon_accountant")
    return save(fig, Path(out), "privacy")


__all__ = ["AUDIT_FILE", "NO_NOISE", "plot_sandwich", "privacy_report", "read_audit", "report_text"]
