"""Saved models: state dicts per pair and trajectory that load into the module and back to the flat vector."""
import pytest
import torch

from stabkit.errors import ConfigError
from stabkit.store.saved_models import load_flat, load_models, model_path, save_models, saved_rounds


def test_round_trip_into_module_and_flat(tmp_path):
    module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    params = dict(module.named_parameters())
    names, shapes = list(params), [p.shape for p in params.values()]
    d = sum(p.numel() for p in params.values())
    x = torch.arange(2 * 2 * d, dtype=torch.float32).reshape(2, 2, d)
    save_models(tmp_path, 7, x, names, shapes)
    assert saved_rounds(tmp_path) == [7]
    module.load_state_dict(torch.load(model_path(tmp_path, 7, 1, "b")))
    assert torch.equal(torch.cat([p.detach().reshape(-1) for p in module.parameters()]), x[1, 1])
    assert len(load_models(tmp_path, 7)) == 2
    assert torch.equal(load_flat(tmp_path, 7), x)


def test_unsaved_round_names_the_saved_ones(tmp_path):
    with pytest.raises(ConfigError, match="no models saved.*none"):
        load_models(tmp_path, 3)
    save_models(tmp_path, 5, torch.zeros(1, 2, 2), ["w"], [torch.Size([2])])
    with pytest.raises(ConfigError, match="saved rounds: 5"):
        load_models(tmp_path, 3)


def test_a_run_saves_models_that_reload_into_the_module_and_reproduce_its_logged_losses(tmp_path):
    import numpy as np
    import torch.nn.functional as F

    from stabkit import RunConfig, TaskOptions, load_run, run_pair
    from stabkit.models.registry import build_model
    from stabkit.run.experiment import PairedRun
    from stabkit.tasks import build_task

    cfg = RunConfig(algo="fedavg", rounds=4, pairs=2, local_steps=2, dtype="float64", constants=False,
                    save_models="every:3", task_options=TaskOptions(clients=8))
    run_pair(cfg, out=tmp_path)
    assert saved_rounds(tmp_path) == [0, 3, 4]
    df = load_run(tmp_path).set_index(["round", "pair"])
    task = build_task(cfg.task, cfg.task_options)
    x_test, y_test = torch.as_tensor(task.test_x), torch.as_tensor(task.test_y)
    for t in (0, 4):
        for pair, states in enumerate(load_models(tmp_path, t)):
            for traj, state in zip("ab", states):
                module = build_model(task.default_model, task).double()
                module.load_state_dict(state)  # the three lines of docs/paired-runs.md
                with torch.no_grad():
                    out = module(x_test.double())
                loss = float(F.cross_entropy(out, y_test))
                acc = float((out.argmax(1) == y_test).double().mean())
                assert np.isclose(loss, df.loc[(t, pair), f"test_loss_{traj}"], rtol=1e-8, atol=0), (t, pair, traj)
                assert np.isclose(acc, df.loc[(t, pair), f"test_acc_{traj}"], rtol=1e-8)
    # --init takes a saved model: both runs of every pair start from it
    again = PairedRun(cfg.replace(init=str(model_path(tmp_path, 4, 1, "b"))))
    assert torch.equal(again.engine.x[0, 0], load_flat(tmp_path, 4)[1, 1])
    assert torch.equal(again.engine.x[1, 1], load_flat(tmp_path, 4)[1, 1])


@pytest.mark.parametrize("spec,wanted", [("none", []), ("final", [10]), ("every:4", [0, 4, 8, 10]),
                                         ("0,5", [0, 5])])
def test_save_spec(spec, wanted):
    from stabkit.store.saved_models import parse_save_spec
    wants = parse_save_spec(spec, 10)
    assert [t for t in range(11) if wants(t)] == wanted


@pytest.mark.parametrize("spec", ["every:0", "every:x", "sometimes", "3,11", "-1"])
def test_bad_save_spec_is_one_config_error(spec):
    from stabkit import RunConfig
    with pytest.raises(ConfigError, match=f"invalid save_models={spec!r}: none, final, every:N"):
        RunConfig(rounds=10, save_models=spec)
