"""The short summary of a paired run (``summary.json`` and the CLI's closing lines)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # summarize takes the run's frame; pandas itself is not needed to import this module
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


# The phases of a run's time line: (label, key of the time accounts); what they leave is "other".
PHASES = (("start-up", "startup_s"), ("training", "train_s"), ("evaluation", "eval_s"), ("sharpness", "sharpness_s"),
          ("writing", "checkpoint_s"), ("constants", "constants_s"))


def time_line(times: dict, total_s: float) -> str:
    """``time: T s (start-up a%, training b%, ...)``: each phase of ``times`` as a share of ``total_s``, and the
    rest as ``other``; whole percents that add up to 100 (largest remainders), a phase under half a percent
    left out."""
    if total_s <= 0:
        return "time: 0 s"
    parts = [(label, times[key]) for label, key in PHASES if times.get(key, 0.0) > 0]
    parts.append(("other", max(0.0, total_s - sum(v for _, v in parts))))
    exact = [100 * v / max(total_s, sum(v for _, v in parts)) for _, v in parts]
    whole = [int(e) for e in exact]
    for i in sorted(range(len(exact)), key=lambda i: whole[i] - exact[i])[: 100 - sum(whole)]:
        whole[i] += 1
    shares = ", ".join(f"{label} {w}%" for (label, _), w in zip(parts, whole) if w)
    return f"time: {total_s:.3g} s ({shares})"


def format_summary(s: dict, startup_s: float = None, process_s: float = None) -> str:
    """A few human-readable lines. With ``startup_s`` and ``process_s`` (the command line's: the process's
    start-up before the run, and its whole time so far) the time line covers the whole process, else the run's
    own accounts (rounds and constants)."""
    fd, md = s["final_disc"], s["max_disc"]
    lines = [
        f"status: {s['status']}" + (f" at round {s['diverged_round']}" if s.get("diverged_round") else "")
        + f" ({s['rounds_done']} rounds, {s['pairs']} pairs, {s['rounds_per_s']:.3g} rounds/s)",
        f"final ||x_T - x'_T|| (round {s['final_round']}): mean {fd['mean']:.4g} ± {fd['std']:.3g} "
        f"[min {fd['min']:.4g}, max {fd['max']:.4g}]",
        f"max over rounds:   mean {md['mean']:.4g} ± {md['std']:.3g} [max {md['max']:.4g}]",
    ]
    if "final_gap" in s:
        acc = s["final_test_acc"]["mean"]  # NaN for a regression task: it has no accuracy to print
        lines.append(f"final gap (test - train loss): {s['final_gap']['mean']:.4g} ± {s['final_gap']['std']:.3g}"
                     + (f"; test acc {acc:.3f}" if np.isfinite(acc) else ""))
    if "time" in s:
        t = s["time"]
        if process_s is None:
            lines.append(time_line(t, t["total_s"]))
        else:
            lines.append(time_line({**t, "startup_s": startup_s}, process_s))
    lines.append(f"written to {s['out']}")
    return "\n".join(lines)
