"""--sharpness-rounds: sharpness measured during a run, without changing the run."""
import numpy as np
import pandas as pd
import pytest

from stabkit import RunConfig, TaskOptions
from stabkit.errors import ConfigError
from stabkit.run.experiment import PairedRun
from tests.helpers import cli

QUAD = dict(task="quadratic", pairs=2, rounds=4, local_steps=3, batch_size=8, constants=False,
            task_options=TaskOptions(quad_dim=6, quad_condition=5, clients=6, heldout_clients=2, samples_per_client=12))


def test_sharpness_rounds_write_rows_and_leave_the_run_unchanged(tmp_path):
    plain = PairedRun(RunConfig(**QUAD))
    plain.run(tmp_path / "plain")
    run = PairedRun(RunConfig(**QUAD, sharpness_rounds=(0, 4)))
    run.run(tmp_path / "sharp")
    a, b = (pd.read_csv(tmp_path / n / "metrics.csv") for n in ("plain", "sharp"))
    pd.testing.assert_frame_equal(a, b)
    sh = pd.read_csv(tmp_path / "sharp" / "sharpness.csv")
    assert list(sh["round"].unique()) == [0, 4] and len(sh) == 2 * 2 * 2
    # every client of the quadratic task has the Hessian H: eigenvalues in [1/5, 1], trace known
    np.testing.assert_allclose(sh["lambda_max"], 1.0, rtol=1e-4)
    np.testing.assert_allclose(sh["lambda_min_ritz"], 0.2, rtol=1e-4)
    np.testing.assert_allclose(sh["lambda_ratio"], 1 / np.logspace(-np.log10(5), 0, 6)[-5], rtol=1e-4)
    assert sh["lanczos_converged"].all()
    end = sh[sh["round"] == 4]
    np.testing.assert_allclose(end["local_lambda_max"], 1.0, rtol=1e-4)  # local objectives: the same H
    assert sh[sh["round"] == 0]["local_lambda_max"].isna().all()  # no clients before round 1
    final = a[a["round"] == 4].sort_values("pair")
    np.testing.assert_allclose(end["loss"].to_numpy()[::2], final["train_loss_a"], rtol=1e-5)


def test_sharpness_rounds_on_the_command_line(tmp_path, capsys):
    code, _, _ = cli(["pair", "--rounds", "3", "--pairs", "1", "--sharpness-rounds", "3", "--no-constants",
                      "--quiet", "--out", str(tmp_path / "r")], capsys)
    assert code == 0
    sh = pd.read_csv(tmp_path / "r" / "sharpness.csv")
    assert list(sh["round"]) == [3, 3] and (sh["lambda_max"] > 0).all() and (sh["sam_0.1"] >= sh["sam_0.01"]).all()
    code, _, err = cli(["pair", "--rounds", "3", "--sharpness-rounds", "4", "--out", str(tmp_path / "x")], capsys)
    assert code == 2 and "sharpness_rounds=[4]" in err and len(err.strip().splitlines()) == 1


def test_bad_sharpness_rounds():
    with pytest.raises(ConfigError, match="sharpness_rounds"):
        RunConfig(rounds=3, sharpness_rounds=(-1,))
