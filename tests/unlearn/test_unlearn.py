"""``stabkit unlearn``: each method's update pinned by a hand computation on the three-client least-squares
problem (float64, full batch), the null case (``--method none`` gives exactly ||x_T^A - x_T^B||), the floor's
retrain machinery (the run's own seed reproduces x_T^B bit for bit), the JSON format, a plug-in method, and
the bad inputs (one line, exit 2, nothing written)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions, load_run, run_pair
from stabkit.run.experiment import PairedRun
from stabkit.run.loop import EngineRounds, run_rounds
from stabkit.store.saved_models import load_flat, model_path
from stabkit.store.updates import load_updates
from stabkit.testing.problems import LR, K, local_models, tiny_task
from stabkit.unlearn import unlearn
from stabkit.unlearn.context import UnlearnContext
from tests.cli.test_bad_inputs import check_refused
from tests.helpers import A3, B3, cli, grad3

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "unlearning"


def _tiny_cfg(seed: int) -> RunConfig:
    return RunConfig(algo="fedavg", rounds=2, pairs=1, local_steps=K, batch_size="full", lr=LR,
                     clients_per_round=2, perturb="remove-client", init="zeros", dtype="float64", seed=seed,
                     store_updates=True, constants=False, task_options=TaskOptions(clients=3, heldout_clients=2))


def _forgotten_in_round_0() -> int:
    """A seed whose forgotten client trains in A's round 0 (so FedEraser's round leaves a client out)."""
    for seed in range(100):
        run = PairedRun(_tiny_cfg(seed), task=tiny_task(A3, B3))
        if run.nb.perturbed_client[0] in run.engine.round_rows(0)[0][0]:
            return seed
    raise AssertionError("no seed found")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """``(run directory, its rebuilt PairedRun, forgotten client)`` of a 2-round remove-client tiny run."""
    seed = _forgotten_in_round_0()
    out = tmp_path_factory.mktemp("tiny") / "run"
    run_pair(_tiny_cfg(seed), out=out, task=tiny_task(A3, B3))
    run = PairedRun(_tiny_cfg(seed), task=tiny_task(A3, B3))
    return out, run, int(run.nb.perturbed_client[0])


def _step(i, y):
    return y - LR * grad3(i, y)


def _fedavg(x, clients):
    return np.mean(local_models(_step, x, clients=[int(c) for c in clients]), axis=0)


def _hand_trajectories(run):
    """x_T^A and x_T^B by hand: FedAvg over each trajectory's cohorts (B's: the coupling's)."""
    xa, xb = np.zeros(2), np.zeros(2)
    for t in range(2):
        _, rows = run.engine.round_rows(t)
        xa, xb = _fedavg(xa, rows[0, 0]), _fedavg(xb, rows[0, 1])
    return xa, xb


def test_the_runs_models_and_stored_updates_are_the_hand_computed_ones(tiny):
    out, run, gone = tiny
    xa, xb = _hand_trajectories(run)
    x = load_flat(out, 2).numpy()
    np.testing.assert_allclose(x[0, 0], xa, rtol=0, atol=1e-12)
    np.testing.assert_allclose(x[0, 1], xb, rtol=0, atol=1e-12)
    cohort, update = load_updates(out, 1)  # round 1: A's cohort of round 0 and its updates y_i - x_0
    assert gone in cohort[0]
    want = [local_models(_step, np.zeros(2), clients=[int(i)])[0] for i in cohort[0]]
    np.testing.assert_allclose(update[0].numpy(), want, rtol=0, atol=1e-12)


def test_none_finetune_and_gradient_ascent_by_hand(tiny):
    out, run, gone = tiny
    xa, xb = _hand_trajectories(run)
    task = tiny_task(A3, B3)
    none = unlearn(out, "none", task=task)["pairs"][0]
    assert none["distance_to_retrain"] == none["distance_none"]
    np.testing.assert_allclose(none["distance_none"], np.linalg.norm(xa - xb), rtol=1e-12)
    assert none["client_steps"] == 0 and none["retrain_client_steps"] == 2 * 2 * K

    # finetune, one round: FedAvg from x_T^A on B's cohort of round T = 2 (the M - 1 remaining clients' law)
    cohort_b = run.engine.round_rows(2)[1][0, 1]
    assert gone not in cohort_b
    got = unlearn(out, "finetune", {"rounds": 1}, task=task)["pairs"][0]
    np.testing.assert_allclose(got["distance_to_retrain"], np.linalg.norm(_fedavg(xa, cohort_b) - xb), rtol=1e-12)
    assert got["client_steps"] == 2 * K

    # gradient ascent: y <- P(y + lr grad F_gone(y)), P the projection on the ball of radius rho around x_T^A
    def ascent(rho, steps=3, lr=0.2):
        y = xa.copy()
        for _ in range(steps):
            y = y + lr * grad3(gone, y)
            y = xa + (y - xa) * min(1.0, rho / np.linalg.norm(y - xa))
        return y
    free = ascent(1e9)
    for rho in (1e9, 0.5 * np.linalg.norm(free - xa)):  # the budget loose, then binding
        got = unlearn(out, "gradient-ascent", {"steps": 3, "lr": 0.2, "radius": float(rho)}, task=task)["pairs"][0]
        np.testing.assert_allclose(got["distance_to_retrain"], np.linalg.norm(ascent(rho) - xb), rtol=1e-12)
        assert got["client_steps"] == 3
    assert np.linalg.norm(ascent(0.5 * np.linalg.norm(free - xa)) - xa) < np.linalg.norm(free - xa)


def test_federaser_calibrated_round_by_hand(tiny):
    """interval 2 over T = 2 rounds: one calibration round, t_1 = 1. The remaining clients of A's round-0
    cohort take ceil(0.5 K) = 1 step from x_0 = 0, and the server adds mean_i ||U_i|| Û_i / ||Û_i||."""
    out, run, gone = tiny
    _, xb = _hand_trajectories(run)
    cohort = [int(i) for i in run.engine.round_rows(0)[0][0]]
    kept = [i for i in cohort if i != gone]
    assert len(kept) == 1  # s = 2 and the forgotten client was sampled
    cal = []
    for i in kept:
        stored = local_models(_step, np.zeros(2), clients=[i])[0]
        fresh = -LR * grad3(i, np.zeros(2))
        cal.append(np.linalg.norm(stored) * fresh / np.linalg.norm(fresh))
    x_u = np.mean(cal, axis=0)
    got = unlearn(out, "federaser", {"interval": 2, "ratio": 0.5}, task=tiny_task(A3, B3))["pairs"][0]
    np.testing.assert_allclose(got["distance_to_retrain"], np.linalg.norm(x_u - xb), rtol=1e-12)
    assert got["client_steps"] == 1


@pytest.fixture(scope="module")
def digits_runs(tmp_path_factory):
    """Small digits runs: remove-client with stored updates, the same without them or without saved models,
    and a client-swap run."""
    root = tmp_path_factory.mktemp("digits")
    base = RunConfig(perturb="remove-client", rounds=4, pairs=2, local_steps=3, eval_every=2, constants=False,
                     task_options=TaskOptions(clients=8, samples_per_client=24))
    run_pair(base.replace(store_updates=True), out=root / "remove")
    run_pair(base, out=root / "no_updates")
    run_pair(base.replace(save_models="none"), out=root / "no_models")
    run_pair(base.replace(perturb="client"), out=root / "client")
    return root


def test_none_is_exactly_the_final_discrepancy_and_json_is_in_pair_order(digits_runs, capsys):
    run = digits_runs / "remove"
    code, out, _ = cli(["unlearn", str(run), "--method", "none", "--format", "json"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["method"] == "none" and [p["pair"] for p in report["pairs"]] == [0, 1]
    x = load_flat(run, 4)
    exact = (x[:, 0] - x[:, 1]).norm(dim=-1).numpy()
    df = load_run(run)
    logged = df[df["round"] == 4].sort_values("pair")["disc"].to_numpy()
    for r, row in enumerate(report["pairs"]):
        assert row["distance_to_retrain"] == row["distance_none"] == float(exact[r])
        np.testing.assert_allclose(row["distance_none"], logged[r], rtol=1e-8)
        assert row["floor"] is None and row["client_steps"] == 0
        assert {"forgotten_acc", "forgotten_acc_retrain", "test_acc", "test_acc_retrain",
                "retrain_client_steps"} <= set(row)


def test_floor_retrains_reproduce_b_under_the_runs_own_seed(digits_runs):
    """The floor's retrain is the run's trajectory B again: under the run's own seed it lands on x_T^B bit for
    bit, so a fresh seed changes nothing but the randomness."""
    run_dir = digits_runs / "remove"
    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    run = PairedRun(cfg)
    x = load_flat(run_dir, 4, run.model.names, run.model.shapes)
    ctx = UnlearnContext(run, run_dir, x[:, 0])
    eng = ctx.engine(ctx.x0, seed=cfg.seed)
    run_rounds(EngineRounds((eng,), cfg.rounds))
    assert torch.equal(eng.x[:, 1], x[:, 1])
    a, b = (unlearn(run_dir, "none", floor_seeds=2)["pairs"] for _ in range(2))
    assert a == b and all(p["floor"] > 0 and p["none_in_floor_units"] == p["distance_none"] / p["floor"] for p in a)


def test_a_plugin_method_runs(digits_runs, capsys, monkeypatch):
    """examples/unlearning/shrink.py by its import path: alpha = 1 returns x_0 exactly."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    run_dir = digits_runs / "remove"
    code, out, err = cli(["unlearn", str(run_dir), "--method", "shrink:Shrink", "--hp", "alpha=1",
                          "--format", "json"], capsys)
    assert code == 0, err
    cfg = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    x0 = PairedRun(cfg).engine.x[:, 0]
    xb = load_flat(run_dir, 4)[:, 1]
    for r, row in enumerate(json.loads(out)["pairs"]):
        assert row["distance_to_retrain"] == float((x0[r] - xb[r]).norm()) and row["client_steps"] == 0


def _edit_model(run):
    path = model_path(run, 4, 0, "b")
    state = torch.load(path)
    name = next(iter(state))
    state[name] = state[name] + 1e-3
    torch.save(state, path)


BAD = [
    (["@client", "--method", "none"], "its perturbation is 'client'; unlearning is measured on a --perturb "
                                      "remove-client run"),
    (["@no_models", "--method", "none"], "no saved final models (round 4)"),
    (["@edited", "--method", "none"], "was changed after the run"),
    (["@remove", "--method", "bogus"], "invalid method='bogus': one of none, finetune, gradient-ascent, federaser"),
    (["@remove", "--method", "finetune", "--hp", "rounds=0"], "invalid rounds=0"),
    (["@remove", "--method", "finetune", "--hp", "rounds=-2"], "invalid rounds=-2"),
    (["@remove", "--method", "finetune", "--hp", "rounds=1.5"], "invalid rounds=1.5: a whole number"),
    (["@remove", "--method", "finetune", "--hp", "epochs=2"], "invalid hyperparameter 'epochs'"),
    (["@remove", "--method", "gradient-ascent", "--hp", "radius=nan"], "invalid radius=nan"),
    (["@remove", "--method", "gradient-ascent", "--hp", "radius=0"], "invalid radius=0"),
    (["@remove", "--method", "gradient-ascent", "--hp", "steps=0"], "invalid steps=0"),
    (["@remove", "--method", "gradient-ascent", "--hp", "lr=-1"], "invalid lr=-1"),
    (["@remove", "--method", "federaser", "--hp", "interval=0"], "invalid interval=0"),
    (["@remove", "--method", "federaser", "--hp", "ratio=nan"], "invalid ratio=nan"),
    (["@no_updates", "--method", "federaser"], "invalid method='federaser': it needs the client updates"),
    (["@remove", "--method", "none", "--floor-seeds", "0"], "invalid floor_seeds=0"),
    (["@remove", "--method", "none", "--floor-seeds", "-3"], "invalid floor_seeds=-3"),
    (["@remove", "--method", "none", "--floor-seeds", "100000"], "invalid floor_seeds=100000: at most 64"),
    (["@remove", "--method", "none", "--format", "xml"], "invalid format='xml'"),
]


@pytest.mark.parametrize("args,needle", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input(digits_runs, tmp_path, capsys, monkeypatch, args, needle):
    name = args[0][1:]
    source = digits_runs / ("remove" if name == "edited" else name)
    shutil.copytree(source, tmp_path / name)
    if name == "edited":
        _edit_model(tmp_path / name)
    check_refused(["unlearn", name, *args[1:]], needle, tmp_path, capsys, monkeypatch)


def test_json_is_strict_on_a_regression_task(tmp_path, capsys):
    """A regression task has no accuracy: the JSON says null (strict JSON, as every file stabkit writes)."""
    cfg = RunConfig(task="quadratic", perturb="remove-client", rounds=3, pairs=2, local_steps=2, clients_per_round=3,
                    constants=False, task_options=TaskOptions(clients=6, samples_per_client=20))
    run_pair(cfg, out=tmp_path / "q")
    code, out, err = cli(["unlearn", str(tmp_path / "q"), "--method", "finetune", "--hp", "rounds=1",
                          "--format", "json"], capsys)
    assert code == 0, err

    def refuse(name):
        raise AssertionError(f"non-strict JSON constant {name}")
    rows = json.loads(out, parse_constant=refuse)["pairs"]
    assert all(r["test_acc"] is None and r["test_loss"] > 0 and r["client_steps"] == 3 * 2 for r in rows)
