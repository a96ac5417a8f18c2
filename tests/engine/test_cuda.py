"""The engine on a GPU: same trajectories as on the CPU, deterministic, fast path equal to torch.func.

Runs only where CUDA is present (the project's CI has no GPU; these were run on a lent H100, see the
docs/performance.md). Everything else in the suite runs on the CPU.
"""
import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.engine.flatmodel import FlatModel
from stabkit.models.convnets import conv_pool_net
from stabkit.run.experiment import PairedRun, run_pair
from stabkit.store.runstore import load_run

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CFG = dict(task="digits", model="cnn", pairs=2, rounds=4, clients_per_round=3, local_steps=3, batch_size=8,
           task_options=TaskOptions(clients=6), dtype="float64", constants=False, local_rounds=())


def _final(device):
    run = PairedRun(RunConfig(device=device, algo="fedsagd", **CFG))
    for t in range(CFG["rounds"]):
        run.step()
    return run.engine.x.cpu()


def test_gpu_trajectories_equal_cpu_trajectories_in_float64():
    cpu, gpu = _final("cpu"), _final("cuda")
    assert cpu.abs().max() > 0
    assert (gpu - cpu).abs().max() <= 1e-9 * float(cpu.abs().max())


def test_gpu_run_is_deterministic(tmp_path):
    cfg = RunConfig(device="cuda", algo="fedavg", **{**CFG, "dtype": "float32"})
    a, b = run_pair(cfg, out=tmp_path / "a"), run_pair(cfg, out=tmp_path / "b")
    assert a["status"] == b["status"] == "completed"
    da, db = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    differ = {c: float(np.nanmax(np.abs(da[c].to_numpy() - db[c].to_numpy())))
              for c in da.select_dtypes("number") if not np.array_equal(da[c], db[c], equal_nan=True)}
    assert differ == {}, f"columns that differ between two runs (max |difference|): {differ}"
    assert (da["disc"].iloc[-1] > 0).all()


def test_gpu_fast_path_matches_torch_func():
    torch.manual_seed(0)
    m = FlatModel(conv_pool_net((1, 28, 28), 10, (6, 16), (120, 84)), "classification", torch.float64,
                  torch.device("cuda"))
    th = m.flatten() + 0.1 * torch.randn(5, m.d, dtype=torch.float64, device="cuda")
    x = torch.randn(5, 7, 1, 28, 28, dtype=torch.float64, device="cuda")
    y = torch.randint(0, 10, (5, 7), device="cuda")
    fast = m.grads(th, x, y)
    m.fast = None
    ref = m.grads(th, x, y)
    assert (fast - ref).abs().max() <= 1e-12 * max(1.0, float(ref.abs().max()))


def test_float32_gpu_run_computes_in_float32_not_tf32():
    cfg = {**CFG, "dtype": "float32"}
    runs = {}
    for device in ("cpu", "cuda"):
        run = PairedRun(RunConfig(device=device, algo="fedavg", **cfg))
        for t in range(cfg["rounds"]):
            run.step()
        runs[device] = run.engine.x.cpu()
    assert not torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    assert (runs["cuda"] - runs["cpu"]).abs().max() <= 1e-5 * float(runs["cpu"].abs().max())


def test_gpu_grouped_resnet_matches_torch_func_and_the_cpu():
    from stabkit.engine.grouped import GroupedModel
    from stabkit.models.resnet import ResNet18GN
    torch.manual_seed(0)
    module = ResNet18GN(3, 5, widths=(4, 6, 8, 8))
    grads = {}
    for device in ("cpu", "cuda"):
        m = FlatModel(module, "classification", torch.float64, torch.device(device))
        assert isinstance(m.fast, GroupedModel)
        gen = torch.Generator().manual_seed(1)
        th = (m.flatten().cpu() + 0.1 * torch.randn(3, m.d, dtype=torch.float64, generator=gen)).to(device)
        x = torch.randn(3, 4, 3, 16, 16, dtype=torch.float64, generator=gen).to(device)
        y = torch.randint(0, 5, (3, 4), generator=gen).to(device)
        grads[device] = m.grads(th, x, y).cpu()
        if device == "cuda":
            m.fast = None
            ref = m.grads(th, x, y).cpu()
            assert (grads[device] - ref).abs().max() <= 1e-12 * max(1.0, float(ref.abs().max()))
    assert (grads["cuda"] - grads["cpu"]).abs().max() <= 1e-12 * max(1.0, float(grads["cpu"].abs().max()))


def _graph_cases():
    from stabkit.models.resnet import ResNet18GN
    torch.manual_seed(0)
    yield conv_pool_net((1, 28, 28), 10, (6, 16), (120, 84)), (1, 28, 28), 10  # the Sequential fast path
    yield ResNet18GN(3, 5, widths=(4, 6, 8, 8)), (3, 16, 16), 5  # the grouped fast path


@pytest.mark.parametrize("case", [0, 1])
def test_cuda_graph_replay_gives_the_eager_gradient_bit_for_bit(monkeypatch, case):
    module, shape, classes = list(_graph_cases())[case]
    m = FlatModel(module, "classification", torch.float32, torch.device("cuda"))
    gen = torch.Generator(device="cuda").manual_seed(2)
    draws = [(m.flatten() + 0.1 * torch.randn(4, m.d, device="cuda", generator=gen),
              torch.randn(4, 5, *shape, device="cuda", generator=gen),
              torch.randint(0, classes, (4, 5), device="cuda", generator=gen)) for _ in range(3)]
    replayed = [m.grads(*args) for args in draws]  # fresh inputs each call: the static buffers are refilled
    assert len(m._graphed.graphs) == 1
    monkeypatch.setenv("STABKIT_CUDA_GRAPHS", "0")
    eager = [m.grads(*args) for args in draws]
    for r, e in zip(replayed, eager):
        assert torch.equal(r, e)  # earlier outputs are copies, untouched by later replays
    assert not torch.equal(eager[0], eager[1])


def test_engine_run_with_and_without_cuda_graphs_is_identical(monkeypatch):
    finals = []
    for graphs in ("1", "0"):
        monkeypatch.setenv("STABKIT_CUDA_GRAPHS", graphs)
        run = PairedRun(RunConfig(device="cuda", algo="scaffold", **{**CFG, "dtype": "float32"}))
        for t in range(CFG["rounds"]):
            run.step()
        finals.append(run.engine.x.cpu())
    assert torch.equal(finals[0], finals[1]) and finals[0].abs().max() > 0
