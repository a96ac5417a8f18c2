"""Grids that reach the optimum (stabkit.atlas.extend): the step beyond an edge, what stops an extension, the
matched-level extension downward, by hand on made-up scores."""
import math

import pandas as pd
import pytest

from stabkit.atlas.extend import LIMIT, Edge, cell_edges, matched_pending, step
from stabkit.atlas.tuning import Axis, Tune

RATES = Axis("lr", (0.0125, 0.025, 0.05, 0.1, 0.2))


def test_step_is_the_grids_ratio_at_each_end_and_momentum_moves_on_one_minus_beta():
    assert step(RATES, 0.2, 1) == 0.4 and step(RATES, 0.4, 1) == 0.8 and step(RATES, 0.0125, -1) == 0.00625
    assert step(Axis("lr", (0.02, 0.05, 0.15)), 0.15, 1) == pytest.approx(0.45)  # 0.15 / 0.05 = 3
    assert step(Axis("lr", (0.02, 0.05, 0.15)), 0.02, -1) == 0.008                # 0.02 / 0.05 = 0.4
    beta = Axis("hp.beta", (0.8, 0.9, 0.95))
    assert step(beta, 0.95, 1) == 0.975 and step(beta, 0.8, -1) == 0.6 and step(beta, 0.6, -1) == 0.2
    assert step(Axis("hp.lam", (0.001, 0.01, 0.1)), 0.1, 1) == 1.0
    assert step(Axis("lr", (0.1,)), 0.1, 1) == 0.2 and step(Axis("lr", (0.1,)), 0.1, -1) == 0.05


def _edges(scores: dict, algo="fedavg", tune=Tune("lr", RATES.grid)):
    return cell_edges({(lr,): s for lr, s in scores.items()}, tune, algo)


def test_a_choice_on_the_edge_is_pending_then_stopped_by_what_lies_beyond():
    grid = dict(zip(RATES.grid, (0.5, 0.6, 0.7, 0.8, 0.9)))
    assert _edges(grid) == [Edge("lr", 1, 0.2, "pending", 0.4, 0)]
    assert _edges({**grid, 0.4: 0.85}) == [Edge("lr", 1, 0.2, "worse", 0.4, 1)]
    assert _edges({**grid, 0.4: -math.inf}) == [Edge("lr", 1, 0.2, "diverged", 0.4, 1)]
    assert _edges({**grid, 0.4: 0.9}) == [Edge("lr", 1, 0.2, "no better", 0.4, 1)]  # a tie stays inside
    assert _edges({**grid, 0.4: 0.95}) == [Edge("lr", 1, 0.4, "pending", 0.8, 1)]
    far = {**grid, 0.4: 0.91, 0.8: 0.92, 1.6: 0.93, 3.2: 0.94}
    assert _edges(far) == [Edge("lr", 1, 3.2, "limit", 3.2, LIMIT)]
    assert _edges(dict(zip(RATES.grid, (0.9, 0.8, 0.7, 0.6, 0.5)))) == [Edge("lr", -1, 0.0125, "pending", 0.00625, 0)]
    assert _edges(dict(zip(RATES.grid, (0.5, 0.6, 0.9, 0.8, 0.7)))) == []  # interior: nothing to extend


def test_an_edge_outside_the_hyperparameters_range_is_a_range_end():
    """FedAvgM's beta chosen at 0.8 (the smallest) at the best lr: beta 0.6, then 0.2, then -0.6: refused."""
    tune = Tune("lr", (0.1, 0.2), (Axis("hp.beta", (0.8, 0.9, 0.95), ("fedavgm",)),))
    scores = {(0.1, b): 0.5 for b in (0.8, 0.9, 0.95)} | {(0.2, 0.8): 0.9, (0.2, 0.9): 0.6, (0.2, 0.95): 0.5,
                                                          (0.4, 0.8): 0.7}
    edges = cell_edges({**scores, (0.2, 0.6): 0.95, (0.2, 0.2): 0.97}, tune, "fedavgm")
    assert edges == [Edge("lr", 1, 0.2, "pending", 0.4, 0), Edge("hp.beta", -1, 0.2, "range end", -0.6, 2)]
    assert edges[1].text() == "range end (-0.6 refused)"


def test_a_curve_that_reaches_the_level_at_its_smallest_rate_is_extended_downward():
    """Level 0.8 (b's best); a reaches it at its smallest rate 0.1 already: run 0.05; b crosses it inside."""
    rows = [("a", 0.1, 0.85, 1.0), ("a", 0.3, 0.9, 2.0), ("b", 0.1, 0.7, 0.5), ("b", 0.3, 0.8, 1.0)]
    cells = pd.DataFrame([{"task": "t", "perturb": "client", "algo": a, "param.lr": lr, "test_acc": acc, "D_T": d,
                           "D_T.hw": 0.1, "status": "ok"} for a, lr, acc, d in rows])
    tune = Tune("lr", (0.1, 0.3))
    chosen = {("t", "a"): {"lr": 0.3}, ("t", "b"): {"lr": 0.3}}
    assert matched_pending(cells, tune, chosen) == {("t", "a"): pytest.approx(0.1 / 3)}
    lower = pd.DataFrame([{"task": "t", "perturb": "client", "algo": "a", "param.lr": 0.1 / 3, "test_acc": 0.6,
                           "D_T": 0.4, "D_T.hw": 0.1, "status": "ok"}])
    assert matched_pending(pd.concat([cells, lower]), tune, chosen) == {}
