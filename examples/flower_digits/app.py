"""A small Flower app that stabkit can measure as it is: a CNN on scikit-learn's 8x8 digits, one partition per
node (``node_config["partition-id"]`` of ``node_config["num-partitions"]``, Flower's simulation convention).

``client_app`` trains LOCAL_STEPS minibatch SGD steps from the arrays it receives; ``server_app`` is the app's
own ServerApp (``flwr run``); ``stabkit_app`` is the entry point ``stabkit pair --flwr-app`` calls: the same
ClientApp, the strategy and initial arrays the ServerApp uses, and the partition counts (PARTITIONS nodes
train; HELDOUT more partitions exist for client perturbation).

    stabkit pair --flwr-app app:stabkit_app --perturb client --pairs 2 --rounds 10 --clients-per-round 5
"""
import functools

import numpy as np
import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from torch import nn

PARTITIONS, HELDOUT = 10, 2
LOCAL_STEPS, BATCH, LR = 5, 16, 0.1


class Net(nn.Module):
    """Conv(1 -> 8, 3x3) -> ReLU -> Linear(8 * 6 * 6 -> 10)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3)
        self.fc = nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@functools.lru_cache(maxsize=None)
def _digits():
    from sklearn.datasets import load_digits

    data = load_digits()
    order = np.random.default_rng(0).permutation(len(data.target))  # a fixed shuffle: partitions are i.i.d.
    return (torch.as_tensor(data.images[order] / 16.0, dtype=torch.float32)[:, None],
            torch.as_tensor(data.target[order], dtype=torch.int64))


def load_partition(partition: int, partitions: int):
    """Node ``partition``'s share of the digits: the partition-th of ``partitions`` contiguous slices."""
    x, y = _digits()
    part = np.array_split(np.arange(len(y)), partitions)[partition]
    return x[part], y[part]


client_app = ClientApp()


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    model = Net()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    x, y = load_partition(context.node_config["partition-id"], context.node_config["num-partitions"])
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for _ in range(LOCAL_STEPS):
        idx = torch.randint(len(y), (BATCH,))  # torch's global generator: stabkit seeds it per call
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    metrics = MetricRecord({"train_loss": loss.item(), "num-examples": len(y)})
    return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=msg)


def server_parts():
    """The strategy and initial arrays the ServerApp uses."""
    torch.manual_seed(0)
    return FedAvg(fraction_train=0.5, min_available_nodes=PARTITIONS), ArrayRecord(Net().state_dict())


server_app = ServerApp()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    strategy, arrays = server_parts()
    strategy.start(grid=grid, initial_arrays=arrays, num_rounds=10)


def stabkit_app() -> dict:
    """The entry point of ``stabkit pair --flwr-app``."""
    strategy, arrays = server_parts()
    return {"client_app": client_app, "strategy": strategy, "arrays": arrays, "partitions": PARTITIONS,
            "heldout": HELDOUT}
