"""Presets' code readings: every reading is a valid configuration, ``pair --preset`` applies the reading of
the chosen algorithm under the config file and the command line, and ``stabkit presets NAME`` lists them."""
import pytest

from stabkit import RunConfig, load_run
from stabkit.algorithms import build_algorithm
from stabkit.config.presets import PRESETS, preset_reading, preset_values
from tests.helpers import cli

READINGS = [(name, algo) for name, p in PRESETS.items() for algo in p.readings]


@pytest.mark.parametrize("name,algo", READINGS)
def test_every_reading_is_a_valid_run(name, algo):
    reading = preset_reading(name, algo)
    assert ("code" in reading.spec or "paper" in reading.spec) and (reading.hp or reading.run)  # says its source
    cfg = RunConfig.from_dict({**preset_values(name), **reading.run, "algo": algo, "hp": reading.hp})
    params = build_algorithm(algo, cfg.hp).p
    assert {k: getattr(params, k) for k in reading.hp} == reading.hp  # each reading reaches the algorithm
    assert {k: cfg.to_dict()[k] for k in reading.run} == reading.run  # and each run option the config


def test_the_issue_readings_are_there():
    assert preset_reading("fedinit-cifar10", "fedinit").hp == {"aggregation": "delta_from_init"}
    assert preset_reading("fedinit-cifar100", "fedadam").hp == {"v_init": "zeros", "tau": 0.01, "beta2": 0.99}
    assert preset_reading("fedinit-cifar10", "feddyn").hp == {"anchor": "start"}
    assert preset_reading("fedswa-cifar10", "fedmoswa").hp == {"gamma": 0.1, "init": "first_upload",
                                                               "denominator": "code"}
    lnag = preset_reading("fedsagd-cifar10", "fedlnag")
    assert lnag.hp == {"momentum_form": "pytorch_nesterov", "momentum_sync": "average"}
    assert lnag.run == {"weight_decay_placement": "gradient"}
    assert preset_reading("libra-cifar10", "fedavg").hp == {}


def _pair(tmp_path, capsys, *extra):
    out = tmp_path / "r"
    code, _, err = cli(["pair", "--preset", "fedinit-cifar10", "--task", "digits", "--model", "mlp", "--rounds", "1",
                        "--clients", "8", "--clients-per-round", "2", "--local-steps", "1", "--batch-size", "4",
                        "--pairs", "1", "--no-constants", "--quiet", "--out", str(out), "--overwrite", *extra], capsys)
    assert code == 0, err
    return load_run(out).attrs["config"]


def test_pair_applies_the_reading_under_options(tmp_path, capsys):
    c = _pair(tmp_path, capsys, "--algo", "fedadam", "--hp", "tau=0.05")
    assert c["hp"] == {"v_init": "zeros", "tau": 0.05, "beta2": 0.99}  # --hp wins over the reading
    assert (c["global_lr"], c["ri_aggregation"], c["weight_decay"]) == (0.1, "delta_from_init", 1e-3)
    c = _pair(tmp_path, capsys, "--algo", "fedadam", "--global-lr", "0.5")
    assert c["global_lr"] == 0.5
    c = _pair(tmp_path, capsys, "--algo", "fedavg")
    assert (c["hp"], c["global_lr"], c["ri_aggregation"]) == ({}, 1.0, "model_avg")


def test_presets_command_lists_readings_with_their_sources(capsys):
    code, out, _ = cli(["presets", "fedswa-cifar10"], capsys)
    assert code == 0 and "fedsagd-cifar10" not in out
    assert "--algo fedmoswa: --hp gamma=0.1 --hp init=first_upload --hp denominator=code" in out
    assert "follows the FedSWA authors' code (FedSWAS)" in out
    code, out, _ = cli(["presets"], capsys)
    assert "code readings for: fedlnag, fedanag, mimelite, fedadam" in out
    code, _, err = cli(["presets", "fedavg-mnist"], capsys)
    assert code == 2 and err.count("\n") == 1 and "invalid preset='fedavg-mnist'" in err


def test_fedlnag_code_reading_reproduces_torch_sgd_nesterov_with_its_weight_decay():
    """The fedsagd presets' FedLNAG reading (fed_localnesterov: torch.optim.SGD(momentum=beta, nesterov=True,
    weight_decay=wd), buffer averaged across rounds) is the authors' code to float64 rounding, weight decay
    inside the Nesterov buffer included; the default placement (decay outside the buffer) is not."""
    import numpy as np
    import torch

    from tests.helpers import LR, A, B, K, run_rounds, tiny_run

    wd, rounds = 1e-2, 4
    reading = preset_reading("fedsagd-cifar10", "fedlnag")
    x, u = torch.zeros(2, dtype=torch.float64), None
    for _ in range(rounds):  # the authors' code, by hand, on the tiny two-client task
        ys, bufs = [], []
        for i in (0, 1):
            y = x.clone().requires_grad_(True)
            opt = torch.optim.SGD([y], lr=LR, momentum=0.9, nesterov=True, weight_decay=wd)
            if u is not None:
                opt.state[y]["momentum_buffer"] = u.clone()
            a, b = torch.as_tensor(A[i]), torch.as_tensor(B[i])
            for _ in range(K):
                opt.zero_grad()
                ((a @ y - b) ** 2).sum().div(2 * len(b)).backward()
                opt.step()
            ys.append(y.detach())
            bufs.append(opt.state[y]["momentum_buffer"])
        x, u = torch.stack(ys).mean(0), torch.stack(bufs).mean(0)
    preset = run_rounds(tiny_run("fedlnag", dict(reading.hp, beta=0.9), rounds, weight_decay=wd, **reading.run),
                        rounds)
    np.testing.assert_allclose(preset, x.numpy(), rtol=1e-12, atol=1e-15)
    default = run_rounds(tiny_run("fedlnag", dict(reading.hp, beta=0.9), rounds, weight_decay=wd), rounds)
    assert np.abs(default - x.numpy()).max() > 1e-6
