"""Evaluation of clients that belong to one model alone (stabkit.engine.evaluation.OwnRows): under sample
perturbation each pair's copy of a client is trajectory B's only, and is evaluated for that model alone —
the same metrics as evaluating every model on all the data, at a cost linear (not quadratic) in the pairs."""
import numpy as np
import pytest

from stabkit import RunConfig
from stabkit.run.experiment import PairedRun


def _run(perturb="sample", pairs=4, **kw):
    run = PairedRun(RunConfig(perturb=perturb, pairs=pairs, rounds=3, dtype="float64", constants=False, **kw))
    recs = [run.step() for _ in range(3)]
    return run, recs[-1]


@pytest.mark.parametrize("task,model,fraction", [("digits", "mlp", 1.0), ("synthetic", "logistic", 0.3),
                                                 ("quadratic", "linear", 1.0)])
def test_own_rows_give_the_all_data_metrics(task, model, fraction):
    run, rec = _run(task=task, model=model, eval_fraction=fraction)
    ev = run.evaluator
    assert ev.own is not None and len(ev.own.models) == 4
    assert ev.own.models.tolist() == [1, 3, 5, 7]  # trajectory B of every pair owns its neighbour client
    split = ev.evaluate(run.engine.x, rec.rows)
    own, ev.own = ev.own, None
    try:
        whole = ev.evaluate(run.engine.x, rec.rows)  # every model on every row, weights zero where not its own
    finally:
        ev.own = own
    assert sorted(split) == sorted(whole)
    for name, v in whole.items():
        if np.isnan(v).all():  # accuracies of a regression task
            assert np.isnan(split[name]).all(), name
            continue
        assert np.abs(split[name] - v).max() <= 1e-12 * max(1.0, np.abs(v).max()), name
    assert not np.allclose(split["train_loss"][:, 0], split["train_loss"][:, 1], rtol=1e-14)  # B's data differ


def test_other_perturbations_evaluate_every_model_on_all_the_data():
    for perturb in ("client", "none"):
        run, _ = _run(perturb=perturb)
        assert run.evaluator.own is None, perturb


def test_evaluation_cost_grows_linearly_with_the_pairs():
    small, _ = _run(pairs=4)
    large, _ = _run(pairs=32)
    assert large.evaluator.flops / small.evaluator.flops == pytest.approx(8, rel=0.02)
