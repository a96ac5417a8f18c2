"""Models: output shapes per task, and task/model mismatches rejected."""
import numpy as np
import pytest
import torch

from stabkit.errors import ConfigError
from stabkit.models.registry import MODELS, build_model
from stabkit.tasks.base import Task


def _task(kind="classification", shape=(1, 8, 8), classes=10):
    x = np.zeros((4, *shape), np.float32)
    y = np.zeros(4, np.int64 if kind == "classification" else np.float32)
    return Task(name="t", kind=kind, num_classes=classes if kind == "classification" else 0,
                input_shape=shape, train_x=[x], train_y=[y], val_x=[x], val_y=[y], test_x=x,
                test_y=y, num_train_clients=1, default_model="mlp")


@pytest.mark.parametrize("name", ["logistic", "mlp", "cnn"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (3, 9, 6)])
def test_classifier_shapes(name, shape):
    model = build_model(name, _task(shape=shape, classes=7), hidden=16)
    assert model(torch.zeros(5, *shape)).shape == (5, 7)


def test_flat_inputs_and_linear():
    assert build_model("mlp", _task(shape=(60,)))(torch.zeros(3, 60)).shape == (3, 10)
    linear = build_model("linear", _task(kind="regression", shape=(10,)))
    assert linear(torch.zeros(3, 10)).shape == (3, 1)
    assert all(p.ndim == 2 for p in linear.parameters())  # no bias


def test_no_batchnorm_or_dropout():
    for name in ("logistic", "mlp", "cnn"):
        layers = build_model(name, _task()).modules()
        assert not any(isinstance(m, (torch.nn.BatchNorm2d, torch.nn.Dropout)) for m in layers)


def test_mismatches_rejected():
    assert MODELS[:4] == ("logistic", "mlp", "cnn", "linear")
    with pytest.raises(ConfigError, match="needs image inputs"):
        build_model("cnn", _task(shape=(60,)))
    with pytest.raises(ConfigError, match="model 'mlp' needs a classification task"):
        build_model("mlp", _task(kind="regression", shape=(10,)))
    with pytest.raises(ConfigError, match="model 'linear' needs a regression task"):
        build_model("linear", _task())
    with pytest.raises(ConfigError, match="one of logistic, mlp, cnn, linear"):
        build_model("resnet", _task())


def test_catalogue_counts_match_the_built_models(capsys):
    """``stabkit models`` prints the catalogue without torch; every count must be the built module's."""
    from stabkit.models.catalogue import CATALOGUE
    from stabkit.models.registry import FACTORIES
    from tests.helpers import cli

    assert list(CATALOGUE) == list(FACTORIES) == list(MODELS)  # one row and one factory per built-in model
    for name in MODELS:
        _, shape, classes, integer = CATALOGUE[name].reference
        task = _task(CATALOGUE[name].kind, shape, classes)
        if integer:
            task.train_x = [np.zeros((1, *shape), np.int64)]
        assert sum(p.numel() for p in build_model(name, task).parameters()) == CATALOGUE[name].parameters, name
    code, out, _ = cli(["models"], capsys)
    assert code == 0 and "resnet18_gn   11,181,642 parameters on CIFAR-10 3x32x32" in out
