"""Saved models: state dicts per pair and trajectory that load into the module and back to the flat vector."""
import pytest
import torch

from stabkit.errors import ConfigError
from stabkit.run.saved_models import load_flat, load_models, model_path, save_models, saved_rounds


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
