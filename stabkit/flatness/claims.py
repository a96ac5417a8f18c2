"""Verdicts on the FedSWA paper's flatness claims (its Figs. 1, 4, 6-10 and Section 6.2;
F1-F4 below) from the jobs of a sweep.

Input: one row per job with ``algo``, the final discrepancy ``D_T`` and the ``sharp_*`` columns of
:func:`stabkit.flatness.runlog.final_sharpness`; an optional heterogeneity axis ``dirichlet_alpha``
(levels); seeds are averaged. Each claim is checked at every level, on the measures named below.
Every comparison is decided within its noise: a difference smaller than its combined standard error (over
seeds, and over each job's models from the ``sharp_*_se`` columns) is *not resolved*, not a failure. A
claim is ``supported`` if every comparison holds, ``not supported`` if one fails beyond its standard
error, else ``not resolved at this size`` (more pairs or seeds would decide it); comparisons without any
standard error (one seed, one model) are decided on the sign and say so:

* F1: FedSWA's global model is flatter and lower than FedAvg's and FedSAM's: lambda_max, SAM sharpness
  (r = 0.05), average-direction sharpness (r = 0.05) and train loss all smaller;
* F2: FedMoSWA has the smallest lambda_max and SAM sharpness of the algorithms run;
* F3: FedSAM sits in a flat but high region: its train loss is above FedSWA's at every level, and its
  lambda_max grows more from the least to the most heterogeneous level than FedSWA's (needs >= 2 levels);
* F4: FedSAM's clients are locally flat while its global model is not: the clients' mean local
  lambda_max is below the global lambda_max, and below FedAvg's clients' local lambda_max.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

LEVEL = "dirichlet_alpha"
MEASURES = {"lambda_max": "sharp_lambda_max", "SAM sharpness (r=0.05)": "sharp_sam_0.05",
            "average sharpness (r=0.05)": "sharp_avg_0.05", "train loss": "sharp_loss"}
TABLE = ["D_T", "sharp_lambda_max", "sharp_lambda_ratio", "sharp_trace", "sharp_sam_0.05", "sharp_avg_0.05",
         "sharp_loss", "sharp_local_lambda_max"]


UNRESOLVED = "not resolved"  # a comparison whose difference is within its combined standard error


def flatness_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (level, algorithm) of the discrepancy and the sharpness measures, with each
    sharpness mean's standard error ``<col>_se``: sqrt(seed variance / n + mean squared per-job SE / n)
    (NaN where neither is known: one seed and no per-job SE)."""
    keys = [k for k in (LEVEL, "algo") if k in jobs]
    cols = [c for c in TABLE if c in jobs]
    groups = jobs.groupby(keys, dropna=False)
    table = groups[cols].mean()
    n = groups.size()
    for c in cols:
        if not c.startswith("sharp_"):
            continue
        seeds = groups[c].var(ddof=1).where(n > 1) / n
        models = groups[f"{c}_se"].apply(lambda v: (v ** 2).mean()) / n if f"{c}_se" in jobs else seeds * np.nan
        both = pd.concat([seeds, models], axis=1)
        table[f"{c}_se"] = np.sqrt(both.sum(axis=1, min_count=1))
    return table.reset_index()


def verdicts(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: claim, verdict (supported / not supported / not resolved at this size / not
    measured), detail."""
    table = flatness_table(jobs)
    levels = sorted(table[LEVEL].unique()) if LEVEL in table else [None]
    at = lambda algo, col, level: (_value(table, algo, col, level), _value(table, algo, f"{col}_se", level))
    rows = [_f1(at, levels), _f2(table, at, levels), _f3(at, levels), _f4(at, levels)]
    return pd.DataFrame(rows, columns=["claim", "verdict", "detail"])


def _value(table, algo, col, level):
    sel = table[table["algo"] == algo]
    if level is not None:
        sel = sel[sel[LEVEL] == level]
    return float(sel[col].iloc[0]) if len(sel) and col in sel else np.nan


def _verdict(claim, checks):
    """checks: [(description, True / False / UNRESOLVED, or None if not measurable)]."""
    known = [(d, h) for d, h in checks if h is not None]
    if not known:
        return [claim, "not measured", "; ".join(d for d, _ in checks) or "missing algorithms or columns"]
    held = sum(h is True for _, h in known)
    failed = [d for d, h in known if h is False]
    unresolved = [d for d, h in known if h == UNRESOLVED]
    verdict = ("not supported" if failed else "not resolved at this size" if unresolved else "supported")
    detail = (f"{held}/{len(known)} comparisons hold" + (f"; fails: {'; '.join(failed)}" if failed else "")
              + (f"; within the standard error: {'; '.join(unresolved)}" if unresolved else ""))
    return [claim, verdict, detail]


def _less(a, b):
    """Whether a < b for ``(value, standard error)`` pairs: True, False, UNRESOLVED (|a - b| within the
    combined SE), None (not measured). Without any SE the sign decides."""
    (a, sa), (b, sb) = a, b
    if np.isnan(a) or np.isnan(b):
        return None
    se = float(np.sqrt(np.nansum([sa ** 2, sb ** 2]))) if not (np.isnan(sa) and np.isnan(sb)) else 0.0
    return UNRESOLVED if abs(a - b) <= se and se > 0 else bool(a < b)


def _fmt(v) -> str:
    value, se = v
    return f"{value:.4g}" + ("" if np.isnan(se) else f" ± {se:.2g}")


def _minus(a, b):
    """(a - b, combined SE) of two ``(value, SE)`` pairs."""
    return a[0] - b[0], float(np.sqrt(np.nansum([a[1] ** 2, b[1] ** 2]))) if not (np.isnan(a[1]) and np.isnan(b[1])) \
        else np.nan


def _lv(level):
    return "" if level is None else f" at α={level:g}"


def _f1(at, levels):
    checks = []
    for level in levels:
        for other in ("fedavg", "fedsam"):
            for name, col in MEASURES.items():
                a, b = at("fedswa", col, level), at(other, col, level)
                checks.append((f"FedSWA {name} {_fmt(a)} vs {other} {_fmt(b)}{_lv(level)}", _less(a, b)))
    return _verdict("F1: FedSWA's global model flatter and lower than FedAvg's and FedSAM's", checks)


def _f2(table, at, levels):
    checks = []
    for level in levels:
        sel = table if level is None else table[table[LEVEL] == level]
        for name in ("lambda_max", "SAM sharpness (r=0.05)"):
            col = MEASURES[name]
            if "fedmoswa" not in set(sel["algo"]) or col not in sel or len(sel) < 2:
                checks.append((f"{name}{_lv(level)}: FedMoSWA or others missing", None))
                continue
            others = sel[sel["algo"] != "fedmoswa"]
            rival = others.loc[others[col].idxmin(), "algo"]  # FedMoSWA against the flattest of the rest
            mo, best = at("fedmoswa", col, level), at(rival, col, level)
            holds = _less(mo, best)
            smallest = "fedmoswa" if holds is True else rival if holds is False else f"fedmoswa or {rival}"
            checks.append((f"smallest {name}{_lv(level)}: {smallest} (FedMoSWA {_fmt(mo)}, {rival} "
                           f"{_fmt(best)})", holds))
    return _verdict("F2: FedMoSWA reaches the flattest global model", checks)


def _f3(at, levels):
    checks = []
    for level in levels:
        a, b = at("fedswa", "sharp_loss", level), at("fedsam", "sharp_loss", level)
        checks.append((f"train loss FedSAM {_fmt(b)} above FedSWA {_fmt(a)}{_lv(level)}", _less(a, b)))
    if len(levels) >= 2 and levels[0] is not None:
        hi_het, lo_het = levels[0], levels[-1]  # small alpha = strong heterogeneity
        grow = {algo: _minus(at(algo, "sharp_lambda_max", hi_het), at(algo, "sharp_lambda_max", lo_het))
                for algo in ("fedsam", "fedswa")}
        checks.append((f"lambda_max growth α={lo_het:g}→{hi_het:g}: FedSAM {grow['fedsam'][0]:+.4g}, "
                       f"FedSWA {grow['fedswa'][0]:+.4g}", _less(grow["fedswa"], grow["fedsam"])))
    return _verdict("F3: FedSAM flat but high; degrades more with heterogeneity than FedSWA", checks)


def _f4(at, levels):
    checks = []
    for level in levels:
        loc, glob = at("fedsam", "sharp_local_lambda_max", level), at("fedsam", "sharp_lambda_max", level)
        avg_loc = at("fedavg", "sharp_local_lambda_max", level)
        checks.append((f"FedSAM local λ_max {_fmt(loc)} below its global {_fmt(glob)}{_lv(level)}",
                       _less(loc, glob)))
        checks.append((f"FedSAM local λ_max {_fmt(loc)} below FedAvg's local {_fmt(avg_loc)}{_lv(level)}",
                       _less(loc, avg_loc)))
    return _verdict("F4: FedSAM's clients locally flat, its global model not", checks)
