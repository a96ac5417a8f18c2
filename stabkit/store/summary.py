"""The short summary of a paired run (``summary.json`` and the CLI's closing lines)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def _stats(values) -> dict:
    v = np.asarray(values, dtype=float)
    return {"mean": float(np.mean(v)), "std": float(np.std(v)), "min": float(np.min(v)),
            "max": float(np.max(v))}


def summarize(df: pd.DataFrame, status: str, diverged_round, wall_s: float, rounds_done: int, out: str,
              nb=None) -> dict:
    """Final and max discrepancy over pairs, final generalisation gap, first hit round, speed."""
    good = df[np.isfinite(df["disc"])]
    last = good[good["round"] == good["round"].max()]
    evaluated = good.dropna(subset=["train_loss_a"]) if "train_loss_a" in good else good.iloc[0:0]
    s = {
        "status": status,
        "diverged_round": diverged_round,
        "rounds_done": int(rounds_done),
        "pairs": int(df["pair"].nunique()),
        "final_round": int(last["round"].iloc[0]),
        "final_disc": _stats(last["disc"]),
        "max_disc": _stats(good.groupby("pair")["disc"].max()),
        "wall_s": float(wall_s),
        "rounds_per_s": float(rounds_done / wall_s) if wall_s > 0 else None,
        "out": out,
    }
    if len(evaluated):
        fin = evaluated[evaluated["round"] == evaluated["round"].max()]
        s["final_gap"] = _stats(np.concatenate([fin["gap_a"], fin["gap_b"]]))
        s["final_test_acc"] = _stats(np.concatenate([fin["test_acc_a"], fin["test_acc_b"]]))
        s["final_train_loss"] = _stats(np.concatenate([fin["train_loss_a"], fin["train_loss_b"]]))
    if "hit" in df:
        hits = df[df["hit"] == 1].groupby("pair")["round"].min()
        s["first_hit_round"] = [int(hits[p]) if p in hits.index else None for p in range(s["pairs"])]
        s["hit_rounds"] = int(df["hit"].fillna(0).sum())
    if nb is not None:
        s["perturbation"] = {"mode": nb.mode, "client": nb.perturbed_client.tolist(),
                             "row": nb.perturbed_row.tolist(), "position": nb.perturbed_position.tolist()}
    return s


def format_summary(s: dict) -> str:
    """A few human-readable lines."""
    fd, md = s["final_disc"], s["max_disc"]
    lines = [
        f"status: {s['status']}" + (f" at round {s['diverged_round']}" if s.get("diverged_round") else "")
        + f" ({s['rounds_done']} rounds, {s['pairs']} pairs, {s['rounds_per_s']:.3g} rounds/s)",
        f"final ||x_T - x'_T|| (round {s['final_round']}): mean {fd['mean']:.4g} ± {fd['std']:.3g} "
        f"[min {fd['min']:.4g}, max {fd['max']:.4g}]",
        f"max over rounds:   mean {md['mean']:.4g} ± {md['std']:.3g} [max {md['max']:.4g}]",
    ]
    if "final_gap" in s:
        lines.append(f"final gap (test - train loss): {s['final_gap']['mean']:.4g} ± {s['final_gap']['std']:.3g}; "
                     f"test acc {s['final_test_acc']['mean']:.3f}")
    if "time" in s:
        t = s["time"]
        sharp = f", sharpness {t['sharpness_share']:.0%}" if t.get("sharpness_share") else ""
        lines.append(f"time: {t['total_s']:.3g} s (training {t['train_s'] / t['total_s']:.0%}, evaluation "
                     f"{t['eval_share']:.0%}{sharp}, constants {t['constants_share']:.0%})" if t["total_s"]
                     else "time: 0 s")
    lines.append(f"written to {s['out']}")
    return "\n".join(lines)
