"""Users' own Flower strategies for the bridge's tests (``--algo flwr:tests.flower_fixtures:NAME``): each one
misbehaves in one way, or sends a config key the local rule cannot honour."""
from flwr.serverapp.strategy import FedAvg


class RaisesAtRound2(FedAvg):
    def aggregate_train(self, server_round, replies):
        if server_round == 2:
            raise RuntimeError("boom")
        return super().aggregate_train(server_round, replies)


class SkipsRound2(FedAvg):
    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        return (None, metrics) if server_round == 2 else (arrays, metrics)


class WrongShape(FedAvg):
    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        from flwr.app import Array, ArrayRecord

        return ArrayRecord({"theta": Array(arrays["theta"].numpy()[:3])}), metrics


class IntegerArrays(FedAvg):
    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        from flwr.app import Array, ArrayRecord

        return ArrayRecord({"theta": Array(arrays["theta"].numpy().astype("int64"))}), metrics


class SendsLearningRate(FedAvg):
    def configure_train(self, server_round, arrays, config, grid):
        config["lr"] = 0.5
        return super().configure_train(server_round, arrays, config, grid)


class HalfTheCohort(FedAvg):
    def configure_train(self, server_round, arrays, config, grid):
        self.fraction_train, self.min_train_nodes = 0.5, 1
        return super().configure_train(server_round, arrays, config, grid)


class Unpicklable(FedAvg):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.hook = lambda v: v


class NotAStrategy:
    pass
