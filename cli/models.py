"""``stabkit models``: the model architectures with their parameter counts on the papers' input shapes, and
the installed plug-in models (entry-point group ``stabkit.models``)."""
import click
import numpy as np

from stabkit import plugins
from stabkit.models.registry import DESCRIPTIONS, MODELS, build_model
from stabkit.tasks.base import Task

# (label, input shape, classes, integer inputs) on which each model's size is reported.
SHAPES = {"char_lstm": ("Shakespeare 80 tokens", (80,), 80, True),
          "logistic": ("EMNIST-L 1x28x28", (1, 28, 28), 10, False),
          "mlp": ("digits 1x8x8, hidden 64", (1, 8, 8), 10, False),
          "linear": ("60 features", (60,), 0, False)}
CIFAR = ("CIFAR-10 3x32x32", (3, 32, 32), 10, False)


def _shape_task(shape: tuple, classes: int, integer: bool) -> Task:
    x = np.zeros((1, *shape), np.int64 if integer else np.float32)
    y = np.zeros(1, np.int64 if classes else np.float32)
    return Task(name="shape", kind="classification" if classes else "regression", num_classes=classes,
                input_shape=shape, train_x=[x], train_y=[y], val_x=[x], val_y=[y], test_x=x, test_y=y,
                num_train_clients=1, default_model="mlp")


@click.command()
def models():
    """List the models (--model NAME) with their parameter counts."""
    for name in MODELS:
        label, shape, classes, integer = SHAPES.get(name, CIFAR)
        count = sum(p.numel() for p in build_model(name, _shape_task(shape, classes, integer)).parameters())
        click.echo(f"{name:<12} {count:>11,d} parameters on {label:<26} {DESCRIPTIONS[name]}")
    for name, ep in plugins.installed("model").items():
        click.echo(f"{name:<12} {'plug-in':>11} factory(task) {ep.value}")


command = models
