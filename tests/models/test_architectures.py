"""The papers' architectures: output shapes, parameter counts from the papers' layer sizes, batched-over-clients
gradients equal to a per-client loop, the cell-loop LSTM equal to torch's, and a short paired run per model."""
import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions, load_run, run_pair
from stabkit.engine.flatmodel import FlatModel
from stabkit.models.lstm import CharLSTM
from stabkit.models.registry import build_model
from stabkit.tasks.base import Task
from stabkit.tasks.fixtures import write_cifar, write_idx, write_leaf, write_tinyimagenet


def _task(shape, classes=10, integer=False):
    x = np.zeros((2, *shape), np.int64 if integer else np.float32)
    y = np.zeros(2, np.int64)
    return Task(name="t", kind="classification", num_classes=classes, input_shape=shape, train_x=[x],
                train_y=[y], val_x=[x], val_y=[y], test_x=x, test_y=y, num_train_clients=1, default_model="mlp")


def _conv(cin, cout, k, bias=True):
    return cin * cout * k * k + (cout if bias else 0)


def _fc(a, b):
    return a * b + b


def _resnet18_gn(classes):
    gn = lambda c: 2 * c  # GroupNorm affine weight and bias
    block = lambda cin, c: _conv(cin, c, 3, False) + gn(c) + _conv(c, c, 3, False) + gn(c) + (
        _conv(cin, c, 1, False) + gn(c) if cin != c else 0)
    stages = sum(block(cin, c) + block(c, c) for cin, c in ((64, 64), (64, 128), (128, 256), (256, 512)))
    return _conv(3, 64, 7, False) + gn(64) + stages + _fc(512, classes)


LSTM_LAYER = lambda i, h: 4 * h * (i + h) + 2 * 4 * h  # W_ih, W_hh, b_ih, b_hh
CASES = {  # model: (input shape, classes, parameter count from the papers' layer sizes, integer inputs)
    "fedavg_cnn": ((3, 32, 32), 10, _conv(3, 64, 5) + _conv(64, 64, 5) + _fc(1600, 384) + _fc(384, 192)
                   + _fc(192, 10), False),
    "lenet5": ((3, 32, 32), 10, _conv(3, 6, 5) + _conv(6, 16, 5) + _fc(400, 120) + _fc(120, 84) + _fc(84, 10), False),
    "vgg11": ((3, 32, 32), 100, _conv(3, 64, 3) + _conv(64, 128, 3) + _conv(128, 256, 3) + _conv(256, 256, 3)
              + _conv(256, 512, 3) + 3 * _conv(512, 512, 3) + _fc(512, 512) + _fc(512, 256) + _fc(256, 100), False),
    "resnet18_gn": ((3, 16, 16), 10, _resnet18_gn(10), False),  # the count does not depend on H, W
    "char_lstm": ((80,), 80, 80 * 8 + LSTM_LAYER(8, 100) + LSTM_LAYER(100, 100) + _fc(100, 80), True),
    "logistic": ((1, 28, 28), 10, _fc(784, 10), False),
}


def _inputs(shape, n, integer, gen):
    return torch.randint(0, 80, (n, *shape), generator=gen) if integer else torch.randn(n, *shape, generator=gen)


@pytest.mark.parametrize("name", list(CASES))
def test_shape_count_and_batched_equals_loop(name):
    shape, classes, count, integer = CASES[name]
    module = build_model(name, _task(shape, classes, integer))
    assert sum(p.numel() for p in module.parameters()) == count
    assert count != 11_181_642 or name == "resnet18_gn"  # torchvision's resnet18(num_classes=10) count
    assert not any(isinstance(m, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.Dropout)) for m in module.modules())
    gen = torch.Generator().manual_seed(0)
    x, y = _inputs(shape, 2 * 2, integer, gen).reshape(2, 2, *shape), torch.randint(0, classes, (2, 2), generator=gen)
    assert module(x[0]).shape == (2, classes)
    # float64, so the batched (vmapped, grouped-conv) and looped sums agree to rounding, not to float32 noise
    flat = FlatModel(module, "classification", torch.float64, torch.device("cpu"))
    x = x if integer else x.double()
    theta = flat.flatten() + 0.01 * torch.randn(2, flat.d, generator=gen, dtype=torch.float64)
    batched = flat.grads(theta, x, y)
    loop = torch.stack([flat.grads(theta[i:i + 1], x[i:i + 1], y[i:i + 1])[0] for i in range(2)])
    assert batched.shape == (2, count) and batched.abs().sum() > 0 and not torch.equal(batched[0], batched[1])
    torch.testing.assert_close(batched, loop, rtol=1e-9, atol=1e-12)


def test_cell_loop_lstm_equals_torch_lstm():
    torch.manual_seed(0)
    ours = CharLSTM()
    torch.manual_seed(0)
    theirs = torch.nn.LSTM(8, 100, 2, batch_first=True)
    own = dict(ours.lstm.named_parameters())
    assert {k: v.shape for k, v in own.items()} == {k: v.shape for k, v in theirs.named_parameters()}
    theirs.load_state_dict(own)
    x = torch.randn(4, 80, 8)
    torch.testing.assert_close(ours.lstm(x), theirs(x)[0], rtol=1e-5, atol=1e-6)
    # the backward too (the cell loop's input contributions go back through unbind), in float64
    ours.double(), theirs.double()
    x = torch.randn(3, 30, 8, dtype=torch.float64, requires_grad=True)
    up = torch.randn(3, 30, 100, dtype=torch.float64)
    mine = torch.autograd.grad((ours.lstm(x) * up).sum(), [x, *own.values()])
    ref = torch.autograd.grad((theirs(x)[0] * up).sum(), [x, *(dict(theirs.named_parameters())[k] for k in own)])
    for a, b in zip(mine, ref):
        assert a.abs().max() > 0
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    write_cifar(root / "cifar", "cifar10", train=24, test=2)
    write_idx(root / "emnist", "emnist_l", train=60, test=6)
    write_leaf(root / "leaf", users=6, samples=(6, 2), length=10)  # short sequences keep the LSTM run fast
    write_tinyimagenet(root / "tiny", classes=3, per_class=6, val=2, size=16)
    return root


RUNS = {"fedavg_cnn": "cifar", "lenet5": "cifar", "vgg11": "cifar", "resnet18_gn": "tiny",
        "char_lstm": "leaf", "logistic": "emnist"}
TASK = {"cifar": "cifar10", "leaf": "shakespeare", "emnist": "emnist_l", "tiny": "tinyimagenet"}


@pytest.mark.parametrize("name", list(RUNS))
def test_short_paired_run_is_deterministic_and_null_pair_is_zero(data, tmp_path, name):
    cfg = RunConfig(algo="fedsagd", task=TASK[RUNS[name]], model=name, rounds=1, pairs=1, local_steps=1,
                    batch_size=2, clients_per_round=2, constants=False,
                    task_options=TaskOptions(data_dir=str(data / RUNS[name]), clients=3, heldout_clients=3))
    for out in ("a", "b"):
        run_pair(cfg, out=tmp_path / out)
    assert (tmp_path / "a" / "metrics.csv").read_bytes() == (tmp_path / "b" / "metrics.csv").read_bytes()
    assert load_run(tmp_path / "a")["disc"].iloc[-1] > 0
    run_pair(cfg.replace(perturb="none"), out=tmp_path / "null")
    df = load_run(tmp_path / "null")
    assert (df["disc"] == 0).all() and np.array_equal(df["train_loss_a"], df["train_loss_b"])


def test_evaluation_chunks_count_what_the_lstm_backward_keeps():
    """The char LSTM keeps ~15x its modules' outputs for its backward (80 steps of gates and states inside one
    module): evaluation chunks are sized from what the backward keeps, not from the outputs alone."""
    m = FlatModel(CharLSTM(), "classification", torch.float32, torch.device("cpu"))
    x = torch.randint(0, 80, (5, 80))
    kept = {}

    def pack(t):
        kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.nn.functional.cross_entropy(m.module(x[:1]), torch.zeros(1, dtype=torch.long)).backward()
    before = {t.untyped_storage().data_ptr() for t in (*m.module.parameters(), x)}  # parameters and data
    activations = sum(n for ptr, n in kept.items() if ptr not in before)
    outputs = 4 * (80 * 8 + 80 * 100 + 80)  # embedding, LSTM and head outputs of one sample, float32
    assert activations > 10 * outputs
    assert m._sample_bytes(x) >= 2 * activations
