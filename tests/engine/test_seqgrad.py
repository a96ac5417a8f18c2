"""The hand-written batched backward (stabkit.engine.seqgrad) against torch.func, and the engine's fast paths."""
import weakref

import pytest
import torch
from torch import nn

import stabkit.engine.paired
from stabkit import RunConfig, TaskOptions
from stabkit.engine.flatmodel import FlatModel
from stabkit.engine.layers import RELU, SeqMaxPool2d
from stabkit.engine.seqgrad import compile_seq
from stabkit.engine.threads import threads_for
from stabkit.models.convnets import conv_pool_net, vgg11
from stabkit.run.experiment import PairedRun
from tests.helpers import fast_path_outputs

MODELS = {  # name -> (kind, module factory, input shape)
    "mlp": ("classification", lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 7), nn.ReLU(), nn.Linear(7, 5)),
            (3, 4)),
    "logistic": ("classification", lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 5)), (3, 4)),
    "linear": ("regression", lambda: nn.Sequential(nn.Flatten(), nn.Linear(12, 1, bias=False)), (3, 4)),
    "lenet5": ("classification", lambda: conv_pool_net((1, 16, 16), 5, (3, 4), (6, 5)), (1, 16, 16)),
    "padded_strided": ("classification", lambda: nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1, stride=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(3, 4, 2, bias=False),
        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 5)), (2, 9, 9)),
    "vgg11": ("classification", lambda: vgg11(1, 5), (1, 32, 32)),
}



@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
@pytest.mark.parametrize("name", list(MODELS))
def test_fast_path_matches_torch_func(name, dtype, tol):
    kind, make, shape = MODELS[name]
    torch.manual_seed(0)
    m = FlatModel(make(), kind, dtype, torch.device("cpu"))
    assert m.fast is not None
    P, B = (2, 3) if name == "vgg11" else (6, 9)  # VGG-11 on torch.func in float64 is slow
    th = m.flatten() + 0.1 * torch.randn(P, m.d, dtype=dtype)  # near a real init: deep nets stay finite
    x = torch.randn(P, B, *shape, dtype=dtype)
    y = torch.randint(0, 5, (P, B)) if kind == "classification" else torch.randn(P, B, dtype=dtype)
    w, ws = (torch.rand(P, B) > 0.3).to(dtype), torch.rand(P, B, dtype=dtype)
    fast, fast_exact = fast_path_outputs(m, th, x, y, w, ws)
    m.fast = None
    ref, ref_exact = fast_path_outputs(m, th, x, y, w, ws)
    for a, b in zip(fast, ref):
        assert a.shape == b.shape and a.abs().max() > 0
        assert (a - b).abs().max() <= tol * max(1.0, float(b.abs().max()))
    for a, b in zip(fast_exact, ref_exact):
        assert torch.equal(a.nan_to_num(-1), b.nan_to_num(-1))  # correctness: identical (NaN for regression)


@pytest.mark.parametrize("name", list(MODELS) + ["fedavg_cnn"])
def test_layer_shape_flops_equal_the_flop_counter(name):
    kind, make, shape = MODELS[name] if name in MODELS else ("classification", lambda: conv_pool_net(
        (3, 32, 32), 10, (64, 64), (384, 192)), (3, 32, 32))
    m = FlatModel(make(), kind, torch.float32, torch.device("cpu"))
    x1, y1 = torch.randn(1, *shape), torch.zeros(1, dtype=torch.long) if kind == "classification" else torch.zeros(1)
    counted = m.flops_per_sample(x1, y1)
    m._flops, m.fast = None, None  # the generic path: torch.utils.flop_counter
    assert counted == m.flops_per_sample(x1, y1) > 0


def test_pool_ties_after_relu_give_torch_func_gradients():
    """Constant image regions make equal positive activations inside a pooling window (and all-zero
    windows after the ReLU); the swapped MaxPool/ReLU must still route gradients as torch does."""
    torch.manual_seed(1)
    m = FlatModel(conv_pool_net((1, 16, 16), 5, (3, 4), (6, 5)), "classification", torch.float64,
                  torch.device("cpu"))
    assert isinstance(m.fast.layers[1], SeqMaxPool2d) and m.fast.layers[2] is RELU
    th = torch.randn(4, m.d, dtype=torch.float64)
    x = torch.zeros(4, 3, 1, 16, 16, dtype=torch.float64)
    x[..., 4:9, 4:9] = 1.0  # flat patches: ties at positive and at zero activations
    y = torch.randint(0, 5, (4, 3))
    fast = m.grads(th, x, y)
    m.fast = None
    assert (fast - m.grads(th, x, y)).abs().max() <= 1e-12


def test_other_architectures_keep_the_generic_path():
    assert compile_seq(nn.Sequential(nn.Linear(4, 2)), "classification") is None  # raw input into a Linear
    assert compile_seq(nn.Sequential(nn.Flatten(), nn.Linear(4, 2), nn.Tanh()), "classification") is None
    assert compile_seq(nn.Sequential(nn.Conv2d(1, 2, 3, padding="same"), nn.Flatten()), "classification") is None
    assert compile_seq(nn.Sequential(nn.Conv2d(1, 2, 3), nn.GroupNorm(1, 2), nn.Flatten()), "classification") is None
    assert compile_seq(nn.Sequential(nn.Conv2d(2, 2, 3, groups=2), nn.Flatten()), "classification") is None
    assert compile_seq(nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2)), "classification") is not None


def _final_state(pairs=2, rounds=3):
    cfg = RunConfig(task="synthetic", pairs=pairs, rounds=rounds, clients_per_round=3, local_steps=4,
                    batch_size=5, task_options=TaskOptions(clients=6, samples_per_client=20), device="cpu")
    run = PairedRun(cfg)
    for t in range(rounds):
        run.step()
    return run.engine.x


def test_prefetched_minibatches_equal_per_step_gathers(monkeypatch):
    prefetched = _final_state()
    monkeypatch.setattr(stabkit.engine.paired, "PREFETCH_BYTES", 0)
    assert torch.equal(prefetched, _final_state())


def test_threads_for_is_scoped():
    """Small work runs on one thread, large work on the policy's count (``run_threads``: the session pins it
    with ``STABKIT_THREADS``), and the count before is restored after either."""
    from stabkit.engine.threads import run_threads

    before = torch.get_num_threads()
    with threads_for(1.0):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with threads_for(1e30):
        assert torch.get_num_threads() == run_threads(1e30)
    assert torch.get_num_threads() == before


def test_the_papers_conv_nets_take_the_fast_path_and_resnet_does_not():
    from stabkit.models.resnet import ResNet18GN
    for module in (conv_pool_net((3, 32, 32), 10, (64, 64), (384, 192)), vgg11(3, 10)):
        assert compile_seq(module, "classification") is not None
    assert compile_seq(ResNet18GN(3, 10), "classification") is None


@pytest.mark.parametrize("name", ["mlp", "lenet5"])
def test_evaluation_in_memory_bounded_chunks_equals_one_call(name, monkeypatch):
    import stabkit.engine.flatmodel
    kind, make, shape = MODELS[name]
    torch.manual_seed(0)
    m = FlatModel(make(), kind, torch.float64, torch.device("cpu"))
    th = m.flatten() + 0.1 * torch.randn(3, m.d, dtype=torch.float64)
    x, y, w = torch.randn(50, *shape, dtype=torch.float64), torch.randint(0, 5, (50,)), torch.rand(3, 50,
                                                                                                  dtype=torch.float64)
    whole = [*m.evaluate(th, x, y, w), *m.losses(th, x, y)]
    assert len(m._chunks(x, 3)) == 1
    monkeypatch.setattr(stabkit.engine.flatmodel, "EVAL_BYTES", 7 * 3 * m._activation_bytes)  # 7 samples a chunk
    assert len(m._chunks(x, 3)) == 8
    chunk, alive, most = m._evaluate_chunk, weakref.WeakSet(), []

    def counted(*args, **kwargs):  # the chunks' gradients still alive when each chunk returns
        out = chunk(*args, **kwargs)
        alive.add(out[0])
        most.append(len(alive))
        return out

    monkeypatch.setattr(m, "_evaluate_chunk", counted)
    chunked = [*m.evaluate(th, x, y, w), *m.losses(th, x, y)]
    assert len(most) == 8 and max(most) <= 3  # summed as they come (the sum, the last and the new chunk): not 8
    for a, b in zip(chunked, whole):
        assert a.shape == b.shape and (a - b).abs().max() <= 1e-12 * max(1.0, float(b.abs().max()))


def test_a_sample_taken_from_a_large_data_set_is_sized_alone():
    """The activation estimate that sizes evaluation chunks counts what one sample's backward makes, not the
    data set the sample is a view of (it did: ResNet-18-GN's evaluation ran in chunks of 2 samples)."""
    kind, make, shape = MODELS["lenet5"]
    big = torch.randn(4000, *shape)
    alone, in_set = (FlatModel(make(), kind, torch.float32, torch.device("cpu"))._sample_bytes(v)
                     for v in (big[:5].clone(), big))
    assert alone == in_set < big.numel() * big.element_size() / 10


def test_allocator_policy_applies_once_on_linux():
    import os
    import sys

    from stabkit.engine.alloc import keep_freed_memory
    first = keep_freed_memory()
    assert first is keep_freed_memory() is (sys.platform.startswith("linux") and not any(
        k.startswith("MALLOC_") for k in os.environ))


def test_runs_above_the_one_thread_threshold_are_deterministic(tmp_path):
    """Ops of >= SMALL_OP_FLOPS run on torch's threads; the same seed must still give identical metrics."""
    import numpy as np

    from stabkit.engine.threads import SMALL_OP_FLOPS
    from stabkit.run.experiment import run_pair
    from stabkit.store.runstore import load_run
    cfg = RunConfig(model="cnn", rounds=4, constants=False, device="cpu")
    assert PairedRun(cfg).engine.step_flops >= SMALL_OP_FLOPS
    a = load_run(run_pair(cfg, out=tmp_path / "a")["out"]).select_dtypes("number").to_numpy()
    b = load_run(run_pair(cfg, out=tmp_path / "b")["out"]).select_dtypes("number").to_numpy()
    assert np.array_equal(a, b, equal_nan=True) and np.nanmax(a) > 0


@pytest.mark.parametrize("classes", [2, 10, 26])
def test_fused_softmax_gradient_equals_torch_func_in_float64(classes):
    """softmax - one-hot, written out (no log_softmax), against torch.func's cross-entropy gradient: mean
    and weighted losses, logits spread far enough that an unshifted exp would overflow float32."""
    import torch.nn.functional as F
    from torch.func import grad, vmap

    from stabkit.engine.seqgrad import softmax_xent, softmax_xent_grad
    torch.manual_seed(classes)
    out = 40 * torch.randn(5, 7, classes, dtype=torch.float64)
    y = torch.randint(0, classes, (5, 7))
    w = torch.rand(5, 7, dtype=torch.float64)
    mean_ref = vmap(grad(lambda o, t: F.cross_entropy(o, t)))(out, y)
    weighted_ref = vmap(grad(lambda o, t, v: (F.cross_entropy(o, t, reduction="none") * v).sum() / v.sum()))(out, y, w)
    mean = softmax_xent_grad(out, y, 1 / 7)
    weighted = softmax_xent_grad(out, y, (w / w.sum(1, keepdim=True))[..., None])
    for got, ref in ((mean, mean_ref), (weighted, weighted_ref)):
        assert (got - ref).abs().max() <= 1e-16 and ref.abs().max() > 0.01
    loss, dout, correct = softmax_xent(out, y)
    assert (loss - F.cross_entropy(out.flatten(0, 1), y.flatten(), reduction="none").view(5, 7)).abs().max() <= 1e-12
    assert (dout / 7 - mean_ref).abs().max() <= 1e-16
    assert torch.equal(correct, (out.argmax(-1) == y).to(out.dtype))
    big = softmax_xent_grad(torch.tensor([[[1e4, 0.0, -1e4]]]), torch.tensor([[1]]), 1.0)  # float32, no overflow
    assert torch.equal(big, torch.tensor([[[1.0, -1.0, 0.0]]]))
