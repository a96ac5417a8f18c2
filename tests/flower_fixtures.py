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


class _Jitter(FedAvg):
    """Adds a tiny draw to the aggregate from round ``FROM`` on (``draw()``: a source the bridge does not seed)."""

    FROM = 1

    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        if server_round < self.FROM:
            return arrays, metrics
        import numpy as np
        from flwr.app import Array, ArrayRecord

        return ArrayRecord({k: Array(a.numpy() + np.float32(1e-4) * self.draw(a.numpy().shape).astype(a.dtype))
                            for k, a in arrays.items()}), metrics


class UrandomFromRound3(_Jitter):
    FROM = 3

    def draw(self, shape):
        import os

        import numpy as np

        return np.frombuffer(os.urandom(4 * int(np.prod(shape))), np.uint32) / np.float64(2 ** 32)


class UnseededGenerator(_Jitter):
    def __init__(self, **kw):
        super().__init__(**kw)
        import numpy as np

        self.rng = np.random.default_rng()

    def draw(self, shape):
        return self.rng.standard_normal(shape)


class NanAtRound2(FedAvg):
    def aggregate_train(self, server_round, replies):
        arrays, metrics = super().aggregate_train(server_round, replies)
        if server_round < 2:
            return arrays, metrics
        import numpy as np
        from flwr.app import Array, ArrayRecord

        return ArrayRecord({"theta": Array(np.full_like(arrays["theta"].numpy(), np.nan))}), metrics


# Flower apps for --flwr-app (entry points returning the dict stabkit.run.flwr_app documents): a one-array model
# whose clients step towards their partition's target; each variant breaks one rule.
def _tiny_app(train, heldout=1):
    import numpy as np
    from flwr.app import Array, ArrayRecord
    from flwr.clientapp import ClientApp

    app = ClientApp()
    app.train()(train)
    return {"client_app": app, "strategy": FedAvg(), "arrays": ArrayRecord({"w": Array(np.zeros(3, np.float32))}),
            "partitions": 4, "heldout": heldout}


def _answer(msg, w, **extra):
    from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict

    return Message(RecordDict({"arrays": ArrayRecord({"w": Array(w), **extra}),
                               "metrics": MetricRecord({"num-examples": 10})}), reply_to=msg)


def _step(msg, context, noise=None):
    import numpy as np

    w = msg.content["arrays"]["w"].numpy()
    target = np.float32(context.node_config["partition-id"])
    return w + np.float32(0.5) * (target - w) + (np.float32(0) if noise is None else noise)


def good_app():
    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context)))


def no_heldout_app():
    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context)), heldout=0)


def nondeterministic_app():
    import os

    import numpy as np

    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context, np.frombuffer(os.urandom(4), np.uint8)
                                                              .astype(np.float32)[:3] * np.float32(1e-3))))


def raising_app():
    def train(msg, context):
        raise ValueError("no data for this node")

    return _tiny_app(train)


def extra_key_app():
    import numpy as np
    from flwr.app import Array

    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context), extra=Array(np.zeros(1, np.float32))))


def wrong_shape_app():
    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context)[:2]))


def not_a_dict_app():
    return ["client_app", "strategy"]


def _round(msg) -> int:
    return int(msg.content["config"]["server-round"])


def nan_from_round3_app():
    import numpy as np

    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context) * (np.float32(np.nan) if _round(msg) >= 3
                                                                               else np.float32(1))))


def nondeterministic_from_round3_app():
    import os

    import numpy as np

    def noise(msg):
        if _round(msg) < 3:
            return None
        return np.frombuffer(os.urandom(4), np.uint8).astype(np.float32)[:3] * np.float32(1e-3)

    return _tiny_app(lambda msg, context: _answer(msg, _step(msg, context, noise(msg))))


def urandom_strategy_app():
    app = good_app()
    return {**app, "strategy": UrandomFromRound3()}
