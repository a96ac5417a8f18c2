"""The engine on a GPU: same trajectories as on the CPU, deterministic, fast path equal to torch.func.

Runs only where CUDA is present (the project's CI has no GPU; these were run on a lent H100, see the
README's Performance section). Everything else in the suite runs on the CPU.
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
    assert np.array_equal(da.select_dtypes("number").to_numpy(), db.select_dtypes("number").to_numpy(),
                          equal_nan=True)
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
