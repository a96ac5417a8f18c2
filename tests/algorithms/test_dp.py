"""DP-FedAvg and the ``--wrap dp`` wrapper (stabkit.algorithms.dp): the update rule against a hand computation,
the counter-based noise, coupling, and the measured sensitivity ``dp_sensitivity``.

Expected values: plain numpy on the tiny problem of tests/helpers.py (two clients, full participation, x_0 = 0).
"""
import numpy as np
import pytest
import torch

from stabkit import RunConfig
from stabkit.config.taskoptions import TaskOptions
from stabkit.engine import rng
from stabkit.engine.noise import gaussian
from stabkit.errors import ConfigError
from stabkit.run.experiment import PairedRun
from stabkit.testing.problems import LR, A, B, K, grad, local_models, tiny_run, tiny_task

CLIP, Z = 0.05, 1.1


def clipped(d, c=CLIP):
    n = np.linalg.norm(d)
    return d * min(1.0, c / n)


def normals(seed, t, d, pair=0, traj=0, purpose="dp-noise"):
    """The engine's standard normals written out: Box-Muller on two counter-based uniforms per coordinate."""
    u1 = np.array([rng.uniform(seed, purpose + "/radius", pair, t, traj, j) for j in range(d)])
    u2 = np.array([rng.uniform(seed, purpose + "/angle", pair, t, traj, j) for j in range(d)])
    return np.sqrt(-2 * np.log(1 - u1)) * np.cos(2 * np.pi * u2)


def test_noise_is_box_muller_of_the_counter_streams_and_coupled_by_default():
    like = torch.zeros((), dtype=torch.float64)
    coupled = gaussian(7, "dp-noise", np.array([0, 3]), 5, 4, "coupled", like)
    independent = gaussian(7, "dp-noise", np.array([0, 3]), 5, 4, "independent", like)
    np.testing.assert_allclose(coupled[1, 0].numpy(), normals(7, 5, 4, pair=3), rtol=0, atol=1e-15)
    assert torch.equal(coupled[:, 0], coupled[:, 1])
    assert torch.equal(independent[:, 0], coupled[:, 0])  # trajectory 0's key is the coupled one
    np.testing.assert_allclose(independent[1, 1].numpy(), normals(7, 5, 4, pair=3, traj=1), rtol=0, atol=1e-15)
    assert not torch.equal(independent[:, 0], independent[:, 1])
    assert torch.equal(gaussian(7, "dp-noise", np.array([1]), 0, 3, "off", like), torch.zeros(1, 2, 3,
                                                                                               dtype=torch.float64))


def reference(rounds, clip=CLIP, z=Z, seed=0):
    """DP-FedAvg by hand: local SGD, deltas clipped to clip, their mean plus z clip / 2 times the noise."""
    x = np.zeros(2)
    for t in range(rounds):
        ys = local_models(lambda i, y: y - LR * grad(i, y), x)
        x = x + np.mean([clipped(y - x, clip) for y in ys], axis=0) + z * clip / 2 * normals(seed, t, 2)
    return x


@pytest.mark.parametrize("how", ["algo", "wrap"])
def test_two_rounds_match_the_hand_computation(how):
    if how == "algo":
        run = tiny_run("dp_fedavg", {"clip": CLIP, "noise_multiplier": Z}, rounds=2)
    else:
        run = tiny_run("fedavg", rounds=2, wrap=f"dp:clip={CLIP},noise_multiplier={Z}")
    run.step()
    run.step()
    np.testing.assert_allclose(run.engine.x[0, 0].numpy(), reference(2), rtol=0, atol=1e-12)
    assert run.algo.name == ("dp_fedavg" if how == "algo" else "fedavg+dp")


def test_wrapper_is_dp_fedavg_bit_for_bit_and_zero_noise_is_clipped_fedavg():
    a = tiny_run("dp_fedavg", {"clip": CLIP, "noise_multiplier": Z}, rounds=3)
    b = tiny_run("fedavg", rounds=3, wrap=f"dp:clip={CLIP},noise_multiplier={Z}")
    for _ in range(3):
        a.step()
        b.step()
    assert torch.equal(a.engine.x, b.engine.x)
    quiet = tiny_run("dp_fedavg", {"clip": 100.0, "noise_multiplier": 0.0}, rounds=1)
    plain = tiny_run("fedavg", rounds=1)
    quiet.step()
    plain.step()
    assert torch.equal(quiet.engine.x, plain.engine.x)  # a clip above every delta's norm leaves it unchanged


def perturbed_run(dp_noise="coupled", perturb="client", rounds=2, algo="dp_fedavg", wrap=None):
    hp = {"clip": CLIP, "noise_multiplier": Z} if algo == "dp_fedavg" else {}
    cfg = RunConfig(algo=algo, hp=hp, wrap=wrap, rounds=rounds, pairs=2, local_steps=K, batch_size="full", lr=LR,
                    clients_per_round=2, perturb=perturb, client_mode="population", init="zeros",
                    dtype="float64", dp_noise=dp_noise, task_options=TaskOptions(clients=2, heldout_clients=2))
    return PairedRun(cfg, task=tiny_task())


def test_null_pair_is_exactly_zero_under_coupled_noise_and_not_under_independent():
    coupled, independent = perturbed_run(perturb="none"), perturbed_run("independent", perturb="none")
    for _ in range(2):
        coupled.step()
        independent.step()
    assert np.all(coupled.engine.discrepancy() == 0)
    assert np.all(independent.engine.discrepancy() > 0)


def test_measured_sensitivity_is_the_differing_clients_clipped_update_difference_over_s():
    """Population mode, both clients in every round: B's perturbed client is held-out client 2 (the first of the
    replacement pool); round 0 starts from x_0 = 0 for both, so dp_sensitivity_0 = ||clip(d_B) - clip(d_A)|| / 2."""
    run = perturbed_run()
    rec = run.step()
    task = tiny_task()
    a_all, b_all = list(A) + [task.train_x[2]], list(B) + [task.train_y[2]]
    for r in range(2):
        i = int(run.nb.perturbed_client[r])
        h = int(run.nb.perturbed_row[r])

        def update(row):
            return local_models(lambda _, y: y - LR * grad(row, y, a_all, b_all), np.zeros(2), clients=(0,))[0]

        expected = np.linalg.norm(clipped(update(h)) - clipped(update(i))) / 2
        assert rec.dp_sensitivity[r] == pytest.approx(expected, rel=1e-12)
        assert expected > 0
    assert np.all(rec.dp_sensitivity <= 2 * CLIP / 2 + 1e-12)


def test_sensitivity_is_nan_where_the_differing_client_is_not_sampled_and_zero_on_the_null_pair():
    assert np.all(perturbed_run(perturb="none").step().dp_sensitivity == 0)
    cfg = RunConfig(algo="dp_fedavg", rounds=4, pairs=2, local_steps=K, batch_size="full", lr=LR, clients_per_round=1,
                    perturb="client", client_mode="population", init="zeros", dtype="float64",
                    task_options=TaskOptions(clients=2, heldout_clients=2))
    run = PairedRun(cfg, task=tiny_task())
    for _ in range(4):
        rec = run.step()
        assert np.array_equal(np.isnan(rec.dp_sensitivity), ~rec.hit.astype(bool))  # hit: the client is sampled
    assert perturbed_run(algo="fedavg").step().dp_sensitivity is None  # no DP layer: nothing measured


def test_measuring_the_sensitivity_changes_nothing_in_the_run():
    a, b = perturbed_run(rounds=3), perturbed_run(rounds=3)
    b.engine.measure_sensitivity = False
    for _ in range(3):
        ra, rb = a.step(), b.step()
    assert torch.equal(a.engine.x, b.engine.x)
    assert ra.grad_evals == rb.grad_evals


@pytest.mark.parametrize("kw, message", [
    (dict(algo="scaffold", wrap="dp:clip=1"), "its uploads (dc, delta) are not only its model delta"),
    (dict(algo="mimelite", wrap="dp:clip=1"), "its uploads (G, delta) are not only its model delta"),
    (dict(algo="dp_fedavg", wrap="dp:clip=1"), "it already adds DP noise"),
    (dict(algo="fedavg", wrap="dp:clip=0"), "invalid clip=0: "),
    (dict(algo="fedavg", wrap="dp:clip=inf"), "invalid clip=inf"),
    (dict(algo="fedavg", wrap="dp:noise_multiplier=-1"), "invalid noise_multiplier=-1: "),
    (dict(algo="fedavg", wrap="dp:sigma=1"), "dp takes clip, noise_multiplier (not 'sigma')"),
    (dict(algo="fedavg", wrap="laplace:b=1"), "the wrapper must be one of dp"),
    (dict(algo="fedavg", wrap="dp:clip"), "expected KEY=VALUE"),
    (dict(algo="dp_fedavg", ri_beta=0.1), "relaxed initialisation would act on the clipped uploads"),
    (dict(algo="fedavg", dp_noise="loud"), "invalid dp_noise='loud'"),
])
def test_bad_dp_settings_are_one_line_errors(kw, message):
    with pytest.raises(ConfigError) as e:
        PairedRun(RunConfig(rounds=1, pairs=1, task_options=TaskOptions(clients=2, heldout_clients=2),
                            clients_per_round=2, batch_size="full", **kw), task=tiny_task())
    assert message in str(e.value) and "\n" not in str(e.value)


def test_noise_and_sensitivity_do_not_depend_on_how_pairs_are_chunked(monkeypatch):
    import stabkit.engine.paired as paired

    whole = perturbed_run("independent", rounds=3)
    records = [whole.step() for _ in range(3)]
    assert whole.engine.pairs_per_chunk() == 2
    monkeypatch.setattr(paired, "CHUNK_BYTES", 2 * 2 * 2 * 8)  # one pair's [2, s, d] float64 clients per chunk
    chunked = perturbed_run("independent", rounds=3)
    assert chunked.engine.pairs_per_chunk() == 1
    for a in records:
        assert np.array_equal(a.dp_sensitivity, chunked.step().dp_sensitivity)
    assert torch.equal(whole.engine.x, chunked.engine.x)


def test_the_engine_asks_the_algorithm_what_it_requires_and_wrappers_pass_it_on():
    """Sensitivities are measured because the algorithm requires them (a capability), not because the engine
    finds a DP class: DP around a named wrapper asks, any wrapper around a DP layer passes the request on,
    FedAvg asks nothing."""
    from stabkit.algorithms.base import CLIENT_SENSITIVITIES, Wrapper

    class Outer(Wrapper):
        tag, tag_title = "outer", "Outer"

    run = perturbed_run(algo="fedsam", wrap=f"dp:clip={CLIP},noise_multiplier={Z}")
    assert CLIENT_SENSITIVITIES in run.algo.requires() and run.engine.measure_sensitivity
    assert run.step().dp_sensitivity is not None
    assert Outer(inner=run.algo).requires() == {CLIENT_SENSITIVITIES}
    plain = perturbed_run(algo="fedavg")
    assert plain.algo.requires() == frozenset() and not plain.engine.measure_sensitivity
