"""The cheaper-evaluation knob eval_fraction: fixed, paired subsets; fraction 1 changes nothing."""
import math

import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.engine.evalsubset import keep_of, keep_per_owner
from stabkit.run.experiment import PairedRun

BASE = dict(pairs=2, rounds=3, clients_per_round=4, local_steps=3, task_options=TaskOptions(clients=8),
            constants=False, local_rounds=(), device="cpu", dtype="float64")


def _metrics(**kw):
    run = PairedRun(RunConfig(**{**BASE, **kw}))
    rec = None
    for t in range(2):
        rec = run.step()
    return run, run.evaluator.evaluate(run.engine.x, rec.rows)


def test_subset_takes_ceil_fraction_of_every_owner_and_is_keyed_on_origin_and_position():
    owner = np.repeat([0, 1, 2], [10, 3, 7])
    keep = keep_per_owner(owner, np.array([5, 6, 5]), 0.25, seed=3, purpose="p")
    counts = np.bincount(owner[keep], minlength=3)
    assert counts.tolist() == [math.ceil(2.5), 1, math.ceil(1.75)]
    assert np.all(np.diff(keep) > 0)
    # two rows of the same task client and size (a neighbour row: one sample replaced) keep the same positions
    same = keep_per_owner(np.repeat([0, 1], [10, 10]), np.array([5, 5]), 0.3, seed=3, purpose="p")
    assert np.array_equal(same[:3], same[3:] - 10)
    assert np.array_equal(keep_per_owner(owner, np.array([5, 6, 5]), 1.0, 3, "p"), np.arange(20))
    assert len(keep_of(97, 0.1, 0, "t")) == 10


def test_fraction_one_is_the_full_evaluation():
    run, full = _metrics()
    assert len(run.evaluator.train[1]) == len(run.data.flat_y)
    assert torch.equal(run.evaluator.test[0], run.data.test_x)


def test_fraction_evaluates_a_paired_subset_close_to_the_full_metrics():
    run_full, full = _metrics(perturb="sample")
    run_sub, sub = _metrics(perturb="sample", eval_fraction=0.3)
    n_full, n_sub = len(run_full.evaluator.train[1]), len(run_sub.evaluator.train[1])
    assert 0.3 * n_full <= n_sub <= 0.3 * n_full + run_full.data.num_rows
    assert run_sub.evaluator.flops < 0.4 * run_full.evaluator.flops
    for name in ("train_loss", "test_loss", "grad_norm_sq", "r_e", "r_u"):
        assert np.isfinite(sub[name]).all()
        assert np.allclose(sub[name], full[name], rtol=0.35), name  # an estimate of the same quantity
    assert not np.allclose(sub["train_loss"], full["train_loss"], rtol=1e-6)  # ... and not the same number


def test_null_pair_stays_exactly_equal_on_the_subset():
    _, m = _metrics(perturb="none", eval_fraction=0.2)
    for name, v in m.items():
        assert np.array_equal(v[:, 0], v[:, 1], equal_nan=True), name


def test_eval_fraction_is_recorded_and_validated():
    from stabkit.errors import ConfigError
    assert RunConfig(eval_fraction=0.5).to_dict()["eval_fraction"] == 0.5
    with pytest.raises(ConfigError, match="eval_fraction=0"):
        RunConfig(eval_fraction=0)


def test_constants_use_all_training_data_whatever_the_evaluation_subset(tmp_path):
    import json

    from stabkit.run.experiment import run_pair
    consts = {}
    for f in (1.0, 0.25):
        cfg = RunConfig(**{**BASE, "constants": True, "eval_fraction": f})
        run_pair(cfg, out=tmp_path / str(f))
        consts[f] = json.loads((tmp_path / str(f) / "constants.json").read_text())
    for name in ("L", "sigma_l2", "sigma_g2", "G", "U"):
        assert consts[1.0][name] == consts[0.25][name] > 0, name  # estimated on the full data both times
