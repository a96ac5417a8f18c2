"""stabkit landscape and stabkit sharpness on saved models: surfaces that pass through the measured losses."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.flatness.directions import filter_normalised
from stabkit.run.experiment import PairedRun
from stabkit.store.saved_models import save_models
from tests.helpers import cli

T = 3


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("flat") / "run"
    cfg = RunConfig(algo="fedswa", pairs=1, rounds=T, clients_per_round=2, local_steps=3, hidden=8,
                    constants=False, task_options=TaskOptions(clients=6, heldout_clients=2))
    run = PairedRun(cfg)
    run.run(out)
    save_models(out, T, run.engine.x, run.model.names, run.model.shapes)
    return out


def test_filter_normalised_directions():
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    shapes = [p.shape for p in module.parameters()]
    theta = torch.cat([p.detach().reshape(-1) for p in module.parameters()]).double()
    d = filter_normalised(theta, shapes, seed=7, index=0)
    w1, b1, w2, b2 = torch.split(d, [12, 4, 8, 2])
    t1, _, t2, _ = torch.split(theta, [12, 4, 8, 2])
    assert (b1 == 0).all() and (b2 == 0).all()  # biases ignored
    torch.testing.assert_close(w1.reshape(4, 3).norm(dim=1), t1.reshape(4, 3).norm(dim=1))  # per filter / row
    torch.testing.assert_close(w2.reshape(2, 4).norm(dim=1), t2.reshape(2, 4).norm(dim=1))
    assert torch.equal(d, filter_normalised(theta, shapes, seed=7, index=0))
    assert not torch.equal(d, filter_normalised(theta, shapes, seed=7, index=1))
    # same seed, another model: the same raw draw, rescaled to that model's filters
    other = filter_normalised(2 * theta, shapes, seed=7, index=0)
    torch.testing.assert_close(other, 2 * d)


def test_landscape_passes_through_the_measured_losses(saved_run, tmp_path, capsys):
    code, out, err = cli(["landscape", str(saved_run), "--points", "5", "--out", str(tmp_path / "l"), "--plot"], capsys)
    assert code == 0, err
    doc = json.loads((tmp_path / "l" / "landscape.json").read_text())["runs"][0]
    m = pd.read_csv(saved_run / "metrics.csv")
    final = m[(m["round"] == T) & (m["pair"] == 0)].iloc[0]
    surface = np.array(doc["random"]["surface"]["train"])
    assert surface.shape == (5, 5)
    np.testing.assert_allclose(surface[2, 2], final["train_loss_a"], rtol=1e-5)  # the model itself at (0, 0)
    np.testing.assert_allclose(doc["random"]["surface"]["test"][2][2], final["test_loss_a"], rtol=1e-5)
    paired = doc["paired"]  # s = -0.5, 0, 0.5, 1, 1.5
    np.testing.assert_allclose(paired["train"][1], final["train_loss_a"], rtol=1e-5)
    np.testing.assert_allclose(paired["train_other"][3], final["train_loss_b"], rtol=1e-5)
    np.testing.assert_allclose(paired["distance"], final["disc"], rtol=1e-5)
    plane = doc["plane"]
    assert doc["replay_max_abs_diff"] == 0.0  # the replay reproduces x_T exactly
    assert len(plane["dots"]["clients"]) == 2 and max(plane["client_residual"]) < 1e-5  # 2 clients span it
    assert min(plane["a"]) < min(c[0] for c in plane["dots"]["clients"]) < max(plane["a"])
    np.testing.assert_allclose(plane["loss_at_server"], final["train_loss_a"], rtol=1e-5)
    assert "filter-wise" in doc["choices"]["random_directions"]
    for name in ("random_contour", "random_surface", "random_slice", "plane_contour", "plane_surface",
                 "paired_slice"):
        assert (tmp_path / "l" / f"{name}.png").is_file() and (tmp_path / "l" / f"{name}.pdf").is_file()


def test_sharpness_of_saved_models(saved_run, tmp_path, capsys):
    code, out, err = cli(["sharpness", str(saved_run), "--probes", "10", "--directions", "4",
                          "--out", str(tmp_path)], capsys)
    assert code == 0, err
    df = pd.read_csv(tmp_path / f"sharpness_round_{T}.csv")
    m = pd.read_csv(saved_run / "metrics.csv")
    final = m[m["round"] == T].sort_values("pair")
    np.testing.assert_allclose(df["loss"].to_numpy()[::2], final["train_loss_a"], rtol=1e-5)
    assert len(df) == 2 and df["lanczos_converged"].all() and (df["lambda_max"] >= df["lambda_5"]).all()


@pytest.mark.parametrize("args, message", [
    (["landscape", "{run}", "--round", "2"], "invalid round=2: no models saved"),
    (["landscape", "{bare}"], "a run with saved models"),
    (["landscape", "{run}", "--points", "1"], "invalid points=1"),
    (["landscape", "{run}", "{run}"], "invalid out=None"),
    (["sharpness", "{run}", "--radius", "0.05,0"], "invalid radius="),
    (["sharpness", "{run}", "--radius", "-1"], "invalid radius="),
    (["sharpness", "{bare}"], "a run with saved models"),
    (["sharpness", "{empty}"], "a run directory written by"),
])
def test_bad_input_is_one_line(saved_run, tmp_path, capsys, args, message):
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text((saved_run / "config.json").read_text())
    args = [a.format(run=saved_run, bare=tmp_path / "bare", empty=tmp_path) for a in args]
    code, _, err = cli(args, capsys)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
