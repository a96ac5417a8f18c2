"""A task's closed-form constants (the quadratic's L, μ, σ_g²) replace the estimates in constants.json, so
bounds on it are evaluated with the true constants; the estimates stay beside them and agree."""
import json

import numpy as np
import pytest

from stabkit import RunConfig, TaskOptions
from stabkit.run.constants import with_exact
from stabkit.run.experiment import run_pair
from stabkit.tasks import build_task

OPTS = TaskOptions(clients=6, heldout_clients=2, samples_per_client=40, quad_dim=8, quad_condition=10.0)
CFG = dict(task="quadratic", pairs=2, rounds=6, clients_per_round=3, local_steps=3, batch_size=8, lr=0.1,
           task_options=OPTS, local_rounds=(), dtype="float64")


@pytest.mark.parametrize("wd", [0.0, 0.05])
def test_quadratic_runs_record_the_exact_constants_and_keep_the_estimates(tmp_path, wd):
    run_pair(RunConfig(**CFG, weight_decay=wd), out=tmp_path / "q")
    c = json.loads((tmp_path / "q" / "constants.json").read_text())
    exact = build_task("quadratic", OPTS).constants
    assert c["L"] == pytest.approx(1.0 + wd, rel=1e-12) and c["mu_sc"] == c["mu_pl"] == pytest.approx(0.1 + wd)
    assert c["sigma_g2"] == exact["sigma_g2"] and c["sigma_g2_mean"] == exact["sigma_g2_mean"]
    assert c["convex"] is True and set(c["exact"]) >= {"L", "mu_sc", "mu_pl", "sigma_g2", "sigma_g2_mean", "convex"}
    assert ("f_star" in c["exact"]) == (wd == 0)  # with weight decay f* is not the task's
    # the estimators, kept beside: power iteration finds L, the dissimilarity is x-independent on this task
    assert c["L_estimated"] == pytest.approx(1.0 + wd, rel=1e-3)
    assert c["sigma_g2_estimated"] == pytest.approx(exact["sigma_g2"], rel=1e-6)


def test_another_model_on_the_quadratic_keeps_its_estimates(tmp_path):
    run_pair(RunConfig(**{**CFG, "model": "tests.plugin_fixtures:two_layer_regressor"}), out=tmp_path / "m")
    c = json.loads((tmp_path / "m" / "constants.json").read_text())
    assert "exact" not in c and "L_estimated" not in c and "convex" not in c


def test_with_exact_replaces_only_what_the_task_knows():
    out = with_exact({"L": 3.0, "G": 2.0, "f_star": 0.5}, {"L": 1.0, "mu": 0.1, "f_star": 0.2}, weight_decay=0.0)
    assert out == {"L": 1.0, "L_estimated": 3.0, "G": 2.0, "f_star": 0.2, "f_star_estimated": 0.5, "mu_sc": 0.1,
                   "mu_pl": 0.1, "exact": ["L", "mu_sc", "mu_pl", "f_star"]}
    assert with_exact({"L": 3.0}, {}) == {"L": 3.0}
    assert np.isclose(with_exact({}, {"mu": 0.1}, weight_decay=0.2)["mu_sc"], 0.3)
