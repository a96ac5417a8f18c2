"""The hand-written MLP backward (stabkit.mlpgrad) against torch.func, and the engine's fast paths."""
import pytest
import torch
from torch import nn

import stabkit.engine
from stabkit import RunConfig, TaskOptions
from stabkit.experiment import PairedRun
from stabkit.flatmodel import FlatModel
from stabkit.mlpgrad import compile_mlp
from stabkit.threads import threads_for

MODELS = {
    "mlp": ("classification", lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 7), nn.ReLU(), nn.Linear(7, 5))),
    "logistic": ("classification", lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 5))),
    "linear": ("regression", lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 1, bias=False))),
}


def _all_outputs(m: FlatModel, th, x, y, w, ws):
    """Minibatch grads (plain, masked), evaluation on shared data and forward losses."""
    g_plain, g_masked = m.grads(th, x, y), m.grads(th, x, y, w)
    g_eval, loss_eval, corr_eval = m.evaluate(th, x[0], y[0], ws)
    loss, corr = m.losses(th, x[0], y[0])
    return [g_plain, g_masked, g_eval, loss_eval, loss], [corr_eval, corr]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("name", list(MODELS))
def test_fast_path_matches_torch_func(name, dtype, tol):
    kind, make = MODELS[name]
    torch.manual_seed(0)
    m = FlatModel(make(), kind, dtype, torch.device("cpu"))
    assert m.fast is not None
    P, B = 6, 9
    th, x = torch.randn(P, m.d, dtype=dtype), torch.randn(P, B, 3, 4, dtype=dtype)
    y = torch.randint(0, 5, (P, B)) if kind == "classification" else torch.randn(P, B, dtype=dtype)
    w, ws = (torch.rand(P, B) > 0.3).to(dtype), torch.rand(P, B, dtype=dtype)
    fast, fast_exact = _all_outputs(m, th, x, y, w, ws)
    m.fast = None
    ref, ref_exact = _all_outputs(m, th, x, y, w, ws)
    for a, b in zip(fast, ref):
        assert a.shape == b.shape and a.abs().max() > 0
        assert (a - b).abs().max() <= tol * max(1.0, float(b.abs().max()))
    for a, b in zip(fast_exact, ref_exact):
        assert torch.equal(a.nan_to_num(-1), b.nan_to_num(-1))  # correctness: identical (NaN for regression)


def test_other_architectures_keep_the_generic_path():
    conv = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2))
    assert compile_mlp(conv, "classification") is None
    assert compile_mlp(nn.Sequential(nn.Linear(4, 2)), "classification") is None  # no leading Flatten
    assert compile_mlp(nn.Sequential(nn.Flatten(), nn.Linear(4, 2), nn.Tanh()), "classification") is None


def _final_state(pairs=2, rounds=3):
    cfg = RunConfig(task="synthetic", pairs=pairs, rounds=rounds, clients_per_round=3, local_steps=4,
                    batch_size=5, task_options=TaskOptions(clients=6, samples_per_client=20), device="cpu")
    run = PairedRun(cfg)
    for t in range(rounds):
        run.engine.step(t)
    return run.engine.x


def test_prefetched_minibatches_equal_per_step_gathers(monkeypatch):
    prefetched = _final_state()
    monkeypatch.setattr(stabkit.engine, "PREFETCH_BYTES", 0)
    assert torch.equal(prefetched, _final_state())


def test_threads_for_is_scoped():
    before = torch.get_num_threads()
    with threads_for(1.0):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with threads_for(1e30):
        assert torch.get_num_threads() == before
