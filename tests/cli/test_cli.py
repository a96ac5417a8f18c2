"""The command line: bad input gives one line and exit status 2; config files; init files; divergence."""
import json

import numpy as np
import pytest
import torch

from stabkit import load_run
from tests.helpers import cli


def ok_cli(args, capsys):
    """Run a command that must succeed; its stdout."""
    code, out, err = cli(args, capsys)
    assert code == 0, err
    return out


BAD = [
    (["--algo", "fedfoo"], "algo='fedfoo'", "fedavg"),
    (["--task", "mnist9"], "task='mnist9'", "digits"),
    (["--perturb", "clients"], "perturb='clients'", "client, sample, remove-client, remove-sample, none"),
    (["--client-mode", "sometimes"], "client_mode='sometimes'", "active, population"),
    (["--lr", "0"], "lr=0.0", "positive"),
    (["--lr", "-0.1"], "lr=-0.1", "positive"),
    (["--participation", "1.5"], "participation=1.5", "(0, 1]"),
    (["--participation", "0"], "participation=0.0", "(0, 1]"),
    (["--clients-per-round", "30"], "clients_per_round=30", "at most the number of clients (20)"),
    (["--dirichlet-alpha", "0"], "dirichlet_alpha=0.0", "positive"),
    (["--dirichlet-alpha", "-1"], "dirichlet_alpha=-1.0", "positive"),
    (["--batch-size", "many"], "batch_size='many'", "'full'"),
    (["--algo", "fedsagd", "--hp", "beta=1.5"], "beta=1.5", "in [0, 1)"),
    (["--algo", "fedprox", "--hp", "mu=0.1"], "'mu'", "allowed are lam"),
    (["--hp", "nonsense"], "hp='nonsense'", "KEY=VALUE"),
    (["--dtype", "float16"], "dtype='float16'", "float32, float64"),
    (["--model", "transformer"], "model='transformer'", "logistic, mlp, cnn, linear"),
    (["--task", "quadratic", "--model", "mlp"], "model='mlp'", "classification task"),
    (["--init", "/nonexistent/weights.pt"], "init='/nonexistent/weights.pt'", "no such file"),
    (["--lr-decay", "1.2"], "lr_decay=1.2", "(0, 1]"),
    (["--rounds", "abc"], "'abc'", "integer"),
    (["--algo", "fedinit", "--ri-beta", "0.1"], "ri_beta=0.1", "--hp beta"),
    (["--ri-aggregation", "sum"], "ri_aggregation='sum'", "model_avg, delta_from_init"),
    (["--augment", "mixup"], "augment='mixup'", "none, crop_flip"),
    (["--eval-fraction", "0"], "eval_fraction=0.0", "(0, 1]"),
    (["--eval-fraction", "1.5"], "eval_fraction=1.5", "(0, 1]"),
    (["--task", "synthetic", "--augment", "crop_flip"], "augment='crop_flip'", "needs image inputs"),
]


@pytest.mark.parametrize("args,value,allowed", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, value, allowed):
    out_dir = tmp_path / "run"
    code, _, err = cli(["pair", *args, "--out", str(out_dir), "--quiet"], capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert value in lines[0] and allowed in lines[0], lines[0]
    assert "Traceback" not in err
    assert not out_dir.exists(), "nothing may be written for a rejected run"


@pytest.mark.parametrize("content,problem", [
    (None, "does not exist"),
    ("not an npz", "cannot"),
    ({"x": np.zeros((10, 3)), "y": np.zeros(10, dtype=int)}, "client"),
    ({"x": np.zeros((10, 3)), "y": np.zeros(9, dtype=int), "client": np.arange(10)}, ""),
])
def test_malformed_npz(tmp_path, capsys, content, problem):
    path = tmp_path / "data.npz"
    if isinstance(content, dict):
        np.savez(path, **content)
    elif content is not None:
        path.write_text(content)
    code, _, err = cli(["pair", "--task", "npz", "--npz-path", str(path), "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and str(path) in err and problem in err, err
    assert not (tmp_path / "r").exists()


def test_unwritable_output_directory(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, _, err = cli(["pair", "--rounds", "1", "--out", str(blocker / "run"), "--quiet"], capsys)
    assert code == 2 and err.startswith("error: invalid out=") and "writable" in err
    assert len(err.strip().splitlines()) == 1


def test_config_file_supplies_options_and_command_line_wins(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("algo: fedsagd\nrounds: 3\npairs: 2\nhp: {beta: 0.5, mu: 0.01}\nclients: 12\nlocal_steps: 2\n")
    ok_cli(["pair", "--config", str(cfg), "--rounds", "2", "--hp", "mu=0.02", "--out", str(tmp_path / "r"),
            "--quiet"], capsys)
    df = load_run(tmp_path / "r")
    c = df.attrs["config"]
    assert (c["algo"], c["rounds"], c["pairs"], c["local_steps"]) == ("fedsagd", 2, 2, 2)
    assert c["hp"] == {"beta": 0.5, "mu": 0.02} and c["task_options"]["clients"] == 12
    assert df["round"].max() == 2 and df["pair"].nunique() == 2
    # config.json of a run is itself a valid config file that re-creates the run
    again = tmp_path / "again"
    ok_cli(["pair", "--config", str(tmp_path / "r" / "config.json"), "--out", str(again), "--quiet"], capsys)
    assert (again / "metrics.csv").read_bytes() == (tmp_path / "r" / "metrics.csv").read_bytes()


def test_bad_config_key(tmp_path, capsys):
    cfg = tmp_path / "run.json"
    cfg.write_text(json.dumps({"algo": "fedavg", "learning_rate": 0.1}))
    code, _, err = cli(["pair", "--config", str(cfg)], capsys)
    assert code == 2 and "'learning_rate'" in err and "allowed keys" in err


def test_init_from_flat_vector_and_state_dict(tmp_path, capsys):
    from stabkit import RunConfig
    from stabkit.run.experiment import PairedRun

    run = PairedRun(RunConfig(pairs=1))
    d = run.model.d
    vec = np.linspace(-1, 1, d).astype(np.float32)
    np.save(tmp_path / "v.npy", vec)
    torch.nn.utils.vector_to_parameters(torch.as_tensor(vec), run.model.module.parameters())
    torch.save(run.model.module.state_dict(), tmp_path / "sd.pt")
    torch.save({"state_dict": run.model.module.state_dict()}, tmp_path / "ckpt.pth")
    for f in ("v.npy", "sd.pt", "ckpt.pth"):
        r = PairedRun(RunConfig(pairs=2, init=str(tmp_path / f)))
        assert np.array_equal(r.engine.x[1, 1].numpy(), vec), f
    np.save(tmp_path / "short.npy", vec[:-1])
    code, _, err = cli(["pair", "--init", str(tmp_path / "short.npy"), "--quiet"], capsys)
    assert code == 2 and f"{d - 1} entries" in err and f"{d} parameters" in err


def test_diverging_run_stops_cleanly_and_keeps_its_log(tmp_path, capsys):
    out = tmp_path / "r"
    code, stdout, err = cli(["pair", "--task", "quadratic", "--lr", "40", "--rounds", "50", "--pairs", "2",
                                 "--out", str(out), "--quiet"], capsys)
    assert code == 1 and "diverged" in err and "Traceback" not in err
    summary = json.loads((out / "summary.json").read_text())
    t = summary["diverged_round"]
    assert summary["status"] == "diverged" and 1 <= t < 50 and summary["rounds_done"] == t - 1
    assert f"at round {t}" in err and f"at round {t}" in stdout
    df = load_run(out)
    assert df["round"].max() == t
    assert np.isfinite(df[df["round"] < t]["disc"]).all()


def test_algos_lists_every_algorithm_with_hyperparameters(capsys):
    out = ok_cli(["algos"], capsys)
    for text in ("fedavg", "fedprox", "lam = 0.01", "fedsagd", "beta = 0.9", "beta_local", "mu = 0.001",
                 "Algorithm 1"):
        assert text in out


def test_pair_default_run_prints_summary(tmp_path, capsys):
    out = ok_cli(["pair", "--algo", "fedsagd", "--rounds", "3", "--pairs", "2", "--out", str(tmp_path / "r"),
                  "--quiet"], capsys)
    assert "final ||x_T - x'_T|| (round 3)" in out and "written to" in out and "rounds/s" in out
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["status"] == "completed" and s["final_disc"]["mean"] > 0


def test_pair_help_comes_from_the_config_field_metadata(capsys):
    import dataclasses

    from stabkit import RunConfig, TaskOptions
    helps = {f.metadata.get("cli_name") or f.name: f.metadata["help"]
             for cls in (RunConfig, TaskOptions) for f in dataclasses.fields(cls) if "help" in f.metadata}
    text = " ".join(ok_cli(["pair", "--help"], capsys).split())  # click wraps the lines
    for key in ("lr", "client_mode", "batch_size", "data_seed", "quad_condition", "constants"):
        assert f"--{key.replace('_', '-')} " in text and " ".join(helps[key].split()) in text, key
    assert "--lr FLOAT client learning rate η_l [default: 0.05]" in text
    assert "--constants / --no-constants estimate the bounds' constants" in text and "[default: on]" in text
    # every documented field is an option
    for key in helps:
        assert f"--{key.replace('_', '-')} " in text, key
