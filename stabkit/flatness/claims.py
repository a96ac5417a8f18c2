"""Verdicts on the FedSWA paper's flatness claims (fedswa.md §4.F) from the jobs of a sweep.

Input: one row per job with ``algo``, the final discrepancy ``D_T`` and the ``sharp_*`` columns of
:func:`stabkit.flatness.runlog.final_sharpness`; an optional heterogeneity axis ``dirichlet_alpha``
(levels); seeds are averaged. Each claim is checked at every level, on the measures the spec names, and is
``supported`` only if every comparison holds (the claims are directional; no tolerance is added):

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


def flatness_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (level, algorithm) of the discrepancy and the sharpness measures."""
    keys = [k for k in (LEVEL, "algo") if k in jobs]
    cols = [c for c in TABLE if c in jobs]
    return jobs.groupby(keys, dropna=False)[cols].mean().reset_index()


def verdicts(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per claim: claim, verdict (supported / not supported / not measured), detail."""
    table = flatness_table(jobs)
    levels = sorted(table[LEVEL].unique()) if LEVEL in table else [None]
    at = lambda algo, col, level: _value(table, algo, col, level)
    rows = [_f1(at, levels), _f2(table, levels), _f3(at, levels), _f4(at, levels)]
    return pd.DataFrame(rows, columns=["claim", "verdict", "detail"])


def _value(table, algo, col, level):
    sel = table[table["algo"] == algo]
    if level is not None:
        sel = sel[sel[LEVEL] == level]
    return float(sel[col].iloc[0]) if len(sel) and col in sel else np.nan


def _verdict(claim, checks):
    """checks: [(description, holds or None if not measurable)]."""
    known = [(d, h) for d, h in checks if h is not None]
    if not known:
        return [claim, "not measured", "; ".join(d for d, _ in checks) or "missing algorithms or columns"]
    held = sum(h for _, h in known)
    verdict = "supported" if held == len(known) else "not supported"
    failed = [d for d, h in known if not h]
    detail = f"{held}/{len(known)} comparisons hold" + (f"; fails: {'; '.join(failed)}" if failed else "")
    return [claim, verdict, detail]


def _less(a, b):
    return None if np.isnan(a) or np.isnan(b) else bool(a < b)


def _lv(level):
    return "" if level is None else f" at α={level:g}"


def _f1(at, levels):
    checks = []
    for level in levels:
        for other in ("fedavg", "fedsam"):
            for name, col in MEASURES.items():
                a, b = at("fedswa", col, level), at(other, col, level)
                checks.append((f"FedSWA {name} {a:.4g} vs {other} {b:.4g}{_lv(level)}", _less(a, b)))
    return _verdict("F1: FedSWA's global model flatter and lower than FedAvg's and FedSAM's", checks)


def _f2(table, levels):
    checks = []
    for level in levels:
        sel = table if level is None else table[table[LEVEL] == level]
        for name in ("lambda_max", "SAM sharpness (r=0.05)"):
            col = MEASURES[name]
            if "fedmoswa" not in set(sel["algo"]) or col not in sel or len(sel) < 2:
                checks.append((f"{name}{_lv(level)}: FedMoSWA or others missing", None))
                continue
            best = sel.loc[sel[col].idxmin(), "algo"]
            checks.append((f"smallest {name}{_lv(level)}: {best}", best == "fedmoswa"))
    return _verdict("F2: FedMoSWA reaches the flattest global model", checks)


def _f3(at, levels):
    checks = []
    for level in levels:
        a, b = at("fedswa", "sharp_loss", level), at("fedsam", "sharp_loss", level)
        checks.append((f"train loss FedSAM {b:.4g} above FedSWA {a:.4g}{_lv(level)}", _less(a, b)))
    if len(levels) >= 2 and levels[0] is not None:
        hi_het, lo_het = levels[0], levels[-1]  # small alpha = strong heterogeneity
        grow = {algo: at(algo, "sharp_lambda_max", hi_het) - at(algo, "sharp_lambda_max", lo_het)
                for algo in ("fedsam", "fedswa")}
        checks.append((f"lambda_max growth α={lo_het:g}→{hi_het:g}: FedSAM {grow['fedsam']:+.4g}, "
                       f"FedSWA {grow['fedswa']:+.4g}", _less(grow["fedswa"], grow["fedsam"])))
    return _verdict("F3: FedSAM flat but high; degrades more with heterogeneity than FedSWA", checks)


def _f4(at, levels):
    checks = []
    for level in levels:
        loc, glob = at("fedsam", "sharp_local_lambda_max", level), at("fedsam", "sharp_lambda_max", level)
        avg_loc = at("fedavg", "sharp_local_lambda_max", level)
        checks.append((f"FedSAM local λ_max {loc:.4g} below its global {glob:.4g}{_lv(level)}", _less(loc, glob)))
        checks.append((f"FedSAM local λ_max {loc:.4g} below FedAvg's local {avg_loc:.4g}{_lv(level)}",
                       _less(loc, avg_loc)))
    return _verdict("F4: FedSAM's clients locally flat, its global model not", checks)
