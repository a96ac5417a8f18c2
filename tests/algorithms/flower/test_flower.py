"""The Flower bridge (``--algo flwr:NAME``): every shipped strategy's null pair is exactly 0, flwr:FedAvg /
FedProx / FedAvgM equal stabkit's own methods to float rounding, the adaptive server optimizers and the robust
aggregators equal their formulas computed by hand from the round's client models, DP noise is coupled and
reproducible, the strategies' state survives checkpoint and resume byte for byte, legacy strategies equal their
counterparts, and the atlas runs and names Flower strategies."""
import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from stabkit import RunConfig, TaskOptions, run_pair
from stabkit.algorithms.flower.bridge import FlowerStrategy
from stabkit.run.experiment import PairedRun, resume_pair
from tests.helpers import lockstep

pytest.importorskip("flwr")

DP = {"strategy": "FedAvg", "noise_multiplier": 0.5}
# every shipped Message-API strategy the bridge drives, with hyperparameters that make it do something
SHIPPED = {
    "FedAvg": {}, "FedProx": {"proximal_mu": 0.1}, "FedAvgM": {"server_momentum": 0.9}, "FedAdam": {},
    "FedYogi": {}, "FedAdagrad": {}, "Krum": {"num_malicious_nodes": 1},
    "MultiKrum": {"num_malicious_nodes": 1, "num_nodes_to_select": 3}, "Bulyan": {"num_malicious_nodes": 1},
    "FedMedian": {}, "FedTrimmedAvg": {"beta": 0.2},
    "DifferentialPrivacyServerSideFixedClipping": {**DP, "clipping_norm": 1.0},
    "DifferentialPrivacyClientSideFixedClipping": {**DP, "clipping_norm": 1.0},
    "DifferentialPrivacyServerSideAdaptiveClipping": {**DP, "clipped_count_stddev": 1.0},
    "DifferentialPrivacyClientSideAdaptiveClipping": {**DP, "clipped_count_stddev": 1.0},
}
SMALL = dict(rounds=3, pairs=2, local_steps=3, clients_per_round=7, constants=False)


def test_every_shipped_strategy_is_covered():
    from stabkit.algorithms.flower.strategies import shipped

    assert sorted(SHIPPED) == shipped()


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_null_pair_is_exactly_zero_and_a_perturbation_separates_the_runs(name):
    for perturb in ("none", "client", "sample"):
        run = PairedRun(RunConfig(algo=f"flwr:{name}", hp=SHIPPED[name], perturb=perturb, **SMALL))
        for _ in range(3):
            run.step()
        disc = run.engine.discrepancy()
        if perturb == "none":
            assert (disc == 0).all(), disc
        elif perturb == "client":
            assert (disc > 0).all(), disc


@pytest.mark.parametrize("perturb", ["remove-client", "remove-sample"])
@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_leave_one_out_pairs_separate_exactly_from_the_first_hit(name, perturb):
    """Every strategy runs the leave-one-out neighbours: B equals A until the removed client is sampled (or the
    removed sample drawn) and differs from then on (DP noise is coupled, so it separates nothing by itself). The
    selecting aggregators (Krum, MultiKrum, Bulyan) may pick the same clients in both runs after a hit: for them
    only "no difference before a hit" holds."""
    run = PairedRun(RunConfig(algo=f"flwr:{name}", hp=SHIPPED[name], perturb=perturb, **SMALL))
    hit = np.zeros(run.cfg.pairs, dtype=bool)
    for _ in range(3):
        hit |= run.step().hit
        disc = run.engine.discrepancy()
        assert np.isfinite(disc).all() and not (disc[~hit] > 0).any(), (disc, hit)
        if name not in ("Krum", "MultiKrum", "Bulyan"):
            assert (disc[hit] > 0).all(), (disc, hit)
    assert hit.any()


def _max_diff(runs) -> float:
    return float((runs[0].engine.x - runs[1].engine.x).abs().max())


@pytest.mark.parametrize("flower, native", [
    (("flwr:FedAvg", {}, {}), ("fedavg", {}, {})),
    (("flwr:FedProx", {"proximal_mu": 0.3}, {}), ("fedprox", {"lam": 0.3}, {})),
    (("flwr:FedAvgM", {"server_momentum": 0.9, "server_learning_rate": 0.5}, {}),
     ("fedavgm", {"beta": 0.9}, {"global_lr": 0.5})),
])
def test_strategy_equals_stabkits_own_method_to_rounding(flower, native):
    """In float64 (in float32 a rounding difference can flip a ReLU of the MLP and grow from 1e-8 to 1e-5
    over a few rounds: benchmarks/flower_differential.py)."""
    for t, runs in lockstep(flower, native, rounds=5, perturb="client", dtype="float64"):
        scale = float(runs[1].engine.x.abs().max())
        assert _max_diff(runs) <= 1e-13 * scale, (t, _max_diff(runs))
        assert np.allclose(runs[0].engine.discrepancy(), runs[1].engine.discrepancy(), rtol=1e-10, atol=0)


@pytest.fixture
def uploads(monkeypatch):
    """The client models ``[R, 2, s, d]`` every round of a bridge run hands its strategies, in order."""
    seen = []
    original = FlowerStrategy.combine

    def spy(self, ctx, ups):
        seen.append(ups["y"].double().clone())
        return original(self, ctx, ups)

    monkeypatch.setattr(FlowerStrategy, "combine", spy)
    return seen


def _run_recording(algo, hp, rounds=3, **kw):
    """A bridge run; the global models before the first and after every round, in float64."""
    run = PairedRun(RunConfig(algo=algo, hp=hp, **{**SMALL, "rounds": rounds, **kw}))
    xs = [run.engine.x.double().clone()]
    for _ in range(rounds):
        run.step()
        xs.append(run.engine.x.double().clone())
    return xs


def _fedopt_by_hand(kind, xs, ys, eta, beta1, beta2, tau):
    """Flower's FedOpt family from its source: delta = mean_i y_i - x_t; m = b1 m + (1 - b1) delta (m_0 = 0);
    v from zeros: Adam b2 v + (1 - b2) delta^2, Yogi v - (1 - b2) delta^2 sign(v - delta^2), Adagrad
    v + delta^2; x_{t+1} = x_t + eta_t m / (sqrt(v) + tau), where only FedAdam scales eta by
    sqrt(1 - b2^(r+1)) / (1 - b1^(r+1)) at server round r (1-based: the exponent starts at 2)."""
    m = v = torch.zeros_like(xs[0])
    out = []
    for r, y in enumerate(ys, start=1):
        x = xs[r - 1]
        delta = y.mean(dim=2) - x
        m = beta1 * m + (1 - beta1) * delta
        v = {"adam": lambda: beta2 * v + (1 - beta2) * delta ** 2,
             "yogi": lambda: v - (1 - beta2) * delta ** 2 * torch.sign(v - delta ** 2),
             "adagrad": lambda: v + delta ** 2}[kind]()
        step = eta * np.sqrt(1 - beta2 ** (r + 1)) / (1 - beta1 ** (r + 1)) if kind == "adam" else eta
        out.append(x + step * m / (v.sqrt() + tau))
    return out


@pytest.mark.parametrize("name, kind, hp", [
    ("FedAdam", "adam", dict(eta=0.1, beta_1=0.9, beta_2=0.99, tau=1e-3)),
    ("FedYogi", "yogi", dict(eta=0.01, beta_1=0.9, beta_2=0.99, tau=1e-3)),
    ("FedAdagrad", "adagrad", dict(eta=0.1, tau=1e-3)),
])
def test_adaptive_server_optimizers_follow_flowers_form_computed_by_hand(name, kind, hp, uploads):
    xs = _run_recording(f"flwr:{name}", hp, perturb="client", dtype="float64")  # m / (sqrt(v) + tau) amplifies
    # the float32 rounding of a small delta by up to 1 / tau
    b1, b2 = hp.get("beta_1", 0.0), hp.get("beta_2", 0.0)
    expected = _fedopt_by_hand(kind, xs, uploads[1:], hp["eta"], b1, b2, hp["tau"])  # [0]: try_round's
    for t, want in enumerate(expected):
        assert torch.allclose(xs[t + 1], want, rtol=1e-10, atol=1e-12), (t, float((xs[t + 1] - want).abs().max()))


def test_flowers_fedadam_differs_from_stabkits_by_its_bias_correction_alone_in_round_one():
    """Round 1 from the same x_0 and batches: the two Adam servers see the same delta, m and v (stabkit's with
    v_init=zeros); Flower's step is eta sqrt(1 - b2^2) / (1 - b1^2) where stabkit's is eta."""
    eta, b1, b2 = 0.1, 0.9, 0.99
    runs = [PairedRun(RunConfig(algo=a, hp=h, perturb="client", dtype="float64", **SMALL, **kw)) for a, h, kw in (
        ("flwr:FedAdam", dict(eta=eta, beta_1=b1, beta_2=b2), {}),
        ("fedadam", dict(beta1=b1, beta2=b2, v_init="zeros"), {"global_lr": eta}))]
    x0 = runs[0].engine.x.double().clone()
    assert torch.equal(x0, runs[1].engine.x.double())
    steps = []
    for run in runs:
        run.step()
        steps.append(run.engine.x.double() - x0)
    factor = np.sqrt(1 - b2 ** 2) / (1 - b1 ** 2)
    assert torch.allclose(steps[0], factor * steps[1], rtol=1e-12, atol=1e-15)
    assert not torch.allclose(steps[0], steps[1], rtol=1e-2)


def _krum_pick(y: np.ndarray, f: int, m: int) -> np.ndarray:
    """Krum (m = 1) / MultiKrum by hand: each client's score is the sum of its squared distances to its
    n - f - 2 nearest others; the mean of the m lowest-scoring clients."""
    d2 = ((y[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    closest = max(1, len(y) - f - 2)
    scores = np.sort(d2, axis=1)[:, 1:closest + 1].sum(1)
    return y[np.argsort(scores, kind="stable")[:m]].mean(0)


def _clip_mean(x: np.ndarray, y: np.ndarray, c: float) -> np.ndarray:
    """FedAvg of the clients' updates clipped to norm c: x + mean_i min(1, c / ||y_i - x||) (y_i - x)."""
    u = y - x
    return x + (u * np.minimum(1.0, c / np.linalg.norm(u, axis=1, keepdims=True))).mean(0)


REFERENCES = {  # strategy, hp -> the new global model from x_t [d] and the round's client models [s, d]
    "FedMedian": ({}, lambda x, y: np.median(y, axis=0)),
    "FedTrimmedAvg": ({"beta": 0.2}, lambda x, y: stats.trim_mean(y, 0.2, axis=0)),
    "Krum": ({"num_malicious_nodes": 1}, lambda x, y: _krum_pick(y, 1, 1)),
    "MultiKrum": ({"num_malicious_nodes": 1, "num_nodes_to_select": 3}, lambda x, y: _krum_pick(y, 1, 3)),
    "Bulyan": ({"num_malicious_nodes": 0}, lambda x, y: y.mean(0)),  # f = 0: every client selected and kept
    "DifferentialPrivacyServerSideFixedClipping": ({**DP, "noise_multiplier": 0.0, "clipping_norm": 0.05},
                                                   lambda x, y: _clip_mean(x, y, 0.05)),
    "DifferentialPrivacyClientSideFixedClipping": ({**DP, "noise_multiplier": 0.0, "clipping_norm": 0.05},
                                                   lambda x, y: _clip_mean(x, y, 0.05)),
    "DifferentialPrivacyServerSideAdaptiveClipping": ({**DP, "noise_multiplier": 0.0, "clipped_count_stddev": 1.0,
                                                       "initial_clipping_norm": 0.05},
                                                      lambda x, y: _clip_mean(x, y, 0.05)),
    "DifferentialPrivacyClientSideAdaptiveClipping": ({**DP, "noise_multiplier": 0.0, "clipped_count_stddev": 1.0,
                                                       "initial_clipping_norm": 0.05},
                                                      lambda x, y: _clip_mean(x, y, 0.05)),
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_aggregators_equal_their_rule_computed_by_hand_from_the_round_clients(name, uploads):
    """Round 1 (the adaptive DP wrapper clips with its initial norm there; later rounds move it)."""
    hp, rule = REFERENCES[name]
    xs = _run_recording(f"flwr:{name}", hp, rounds=1, perturb="client", dtype="float64")
    y = uploads[-1].numpy()
    for i in range(2):
        for j in range(2):
            want = rule(xs[0][i, j].numpy(), y[i, j])
            assert np.allclose(xs[1][i, j].numpy(), want, rtol=1e-12, atol=1e-14), (i, j)


@pytest.mark.parametrize("name", [n for n in sorted(SHIPPED) if "Privacy" in n])
def test_dp_noise_is_drawn_reproducibly_and_differs_between_pairs(name):
    def run():
        r = PairedRun(RunConfig(algo=f"flwr:{name}", hp=SHIPPED[name], perturb="none", **SMALL))
        for _ in range(2):
            r.step()
        return r.engine.x.clone()

    first, again = run(), run()
    assert torch.equal(first, again)
    quiet = PairedRun(RunConfig(algo=f"flwr:{name}", hp={**SHIPPED[name], "noise_multiplier": 0.0},
                                perturb="none", **SMALL))
    for _ in range(2):
        quiet.step()
    noise = first - quiet.engine.x
    assert float(noise.abs().min()) > 0  # every coordinate got noise
    assert not torch.allclose(noise[0], noise[1])  # pairs draw their own


def _quad(**kw):
    base = dict(task="quadratic", pairs=2, rounds=6, local_steps=3, checkpoint_every=2, eval_every=2,
                constants=False, task_options=TaskOptions(clients=8, samples_per_client=20), clients_per_round=4)
    return RunConfig(**{**base, **kw})


@pytest.mark.parametrize("algo, hp", [
    ("flwr:FedAdam", {}),
    ("flwr:DifferentialPrivacyServerSideAdaptiveClipping", SHIPPED["DifferentialPrivacyServerSideAdaptiveClipping"]),
])
def test_resume_continues_the_strategies_state_to_byte_identical_metrics(algo, hp, tmp_path):
    run_pair(_quad(algo=algo, hp=hp), out=tmp_path / "full")
    run_pair(_quad(algo=algo, hp=hp, rounds=3), out=tmp_path / "short")
    resume_pair(tmp_path / "short", rounds=6)
    assert (tmp_path / "full" / "metrics.csv").read_bytes() == (tmp_path / "short" / "metrics.csv").read_bytes()


FIX = "flwr:tests.flower_fixtures:"


def test_config_the_local_rule_cannot_honour_is_reported_once(capsys):
    run = PairedRun(RunConfig(algo=f"{FIX}SendsLearningRate", **SMALL))
    for _ in range(3):
        run.step()
    err = capsys.readouterr().err
    assert err.count("sends config 'lr'=0.5, which stabkit's local rule does not honour") == 1


def test_a_round_the_strategy_skips_keeps_the_model_and_is_reported(capsys):
    run = PairedRun(RunConfig(algo=f"{FIX}SkipsRound2", **SMALL))
    run.step()
    before = run.engine.x.clone()
    run.step()
    assert torch.equal(run.engine.x, before)
    assert run.algo.skipped == [(2, 0, "A"), (2, 0, "B"), (2, 1, "A"), (2, 1, "B")]
    assert "aggregated nothing at round 2 (pair 0, trajectory A): the model is kept" in capsys.readouterr().err
    run.step()
    assert not torch.equal(run.engine.x, before)


LEGACY = "flwr:flwr.server.strategy:"


@pytest.mark.parametrize("legacy, other", [
    ((f"{LEGACY}FedAvg", {}, {}), ("fedavg", {}, {})),
    ((f"{LEGACY}FedProx", {"proximal_mu": 0.3}, {}), ("fedprox", {"lam": 0.3}, {})),
    ((f"{LEGACY}FedMedian", {}, {}), ("flwr:FedMedian", {}, {})),
    ((f"{LEGACY}Krum", {"num_malicious_clients": 1}, {}), ("flwr:Krum", {"num_malicious_nodes": 1}, {})),
])
def test_legacy_strategies_equal_their_message_api_or_native_counterparts(legacy, other):
    for t, runs in lockstep(legacy, other, rounds=3, perturb="client", dtype="float64"):
        assert _max_diff(runs) <= 1e-13 * float(runs[1].engine.x.abs().max()), (t, _max_diff(runs))


def test_a_legacy_fedopt_strategy_gets_its_initial_parameters_and_a_null_pair_of_zero():
    run = PairedRun(RunConfig(algo=f"{LEGACY}FedAdam", perturb="none", **SMALL))
    for _ in range(3):
        run.step()
    assert (run.engine.discrepancy() == 0).all()
    assert run.algo.copies[0, 0].current_weights is not None


def test_atlas_runs_flower_strategies_and_labels_them_by_their_flower_names(tmp_path, capsys):
    from stabkit.atlas.names import algo_title, setting_name
    from tests.helpers import cli

    assert algo_title("flwr:Krum") == "Krum (Flower)"
    assert setting_name({"algo": "flwr:FedMedian", "hp.beta": 0.2}) == "FedMedian (Flower), beta 0.2"
    code, out, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg,flwr:Krum", "--seeds", "1", "--pairs", "2",
                          "--no-projection", "--no-top-up", "--workers", "1", "--quiet", "--out",
                          str(tmp_path / "atlas")], capsys)
    assert code == 0, err
    cells = pd.read_csv(tmp_path / "atlas" / "cells.csv")
    assert set(cells["algo"]) == {"fedavg", "flwr:Krum"} and len(cells) == 12
    assert "Krum (Flower)" in (tmp_path / "atlas" / "index.html").read_text()
