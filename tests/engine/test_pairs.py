"""Paired-run invariants: null pairs, determinism, coupling of the random streams, batched = loop."""
import copy

import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions, load_local, load_run, run_pair
from stabkit.engine.sampling import batch_positions
from stabkit.run.experiment import PairedRun

NULL_CONFIGS = {
    "digits-mlp-minibatch": dict(),
    "synthetic-full-batch-wd-clip": dict(task="synthetic", batch_size="full", weight_decay=0.01, clip=1.0,
                                         task_options=TaskOptions(clients=10, samples_per_client=30)),
    "quadratic-float64-decay": dict(task="quadratic", dtype="float64", lr_decay=0.97, global_lr=0.5,
                                    task_options=TaskOptions(clients=8, samples_per_client=20)),
    "digits-cnn-iid": dict(model="cnn", task_options=TaskOptions(partition="iid")),
}


@pytest.mark.parametrize("algo", ["fedavg", "fedprox", "fedsagd"])
@pytest.mark.parametrize("setting", list(NULL_CONFIGS))
def test_null_pair_has_exactly_zero_discrepancy(tmp_path, algo, setting):
    cfg = RunConfig(algo=algo, perturb="none", rounds=6, pairs=2, local_rounds=(0, 3), **NULL_CONFIGS[setting])
    run_pair(cfg, out=tmp_path)
    df = load_run(tmp_path)
    assert (df["disc"] == 0).all()
    for col in ("train_loss", "test_loss", "grad_norm_sq", "r_e"):
        assert np.array_equal(df[f"{col}_a"].to_numpy(), df[f"{col}_b"].to_numpy(), equal_nan=True)
    if algo == "fedsagd":
        assert (df["disc_v"] == 0).all() and (df["norm_v_a"].iloc[-1] > 0)
    local = load_local(tmp_path)
    assert (local["l2"] == 0).all() and (local["l3"] == local["l1_a"]).all() and (local["l1_a"] > 0).any()


def test_same_seed_gives_identical_files_and_other_seed_differs(tmp_path):
    cfg = RunConfig(algo="fedsagd", rounds=8, pairs=3, local_rounds=(2,))
    for name in ("a", "b"):
        run_pair(cfg, out=tmp_path / name)
    run_pair(cfg.replace(seed=1), out=tmp_path / "c")
    for f in ("metrics.csv", "local.csv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert (tmp_path / "a" / "metrics.csv").read_bytes() != (tmp_path / "c" / "metrics.csv").read_bytes()


@pytest.mark.parametrize("perturb,mode", [("sample", "active"), ("client", "population")])
def test_runs_are_identical_until_the_perturbation_first_acts(tmp_path, perturb, mode):
    cfg = RunConfig(algo="fedavg", perturb=perturb, client_mode=mode, rounds=30, pairs=6, eval_every=10)
    summary = run_pair(cfg, out=tmp_path)
    df = load_run(tmp_path)
    firsts = []
    for pair, g in df.groupby("pair"):
        g = g.set_index("round")
        first = g.index[g["hit"] == 1].min()
        firsts.append(first)
        assert (g.loc[: first - 1, "disc"] == 0).all(), f"pair {pair} differs before its first hit"
        assert (g.loc[first:, "disc"] > 0).all(), f"pair {pair} identical after its first hit"
    assert max(firsts) > 1, "every pair was hit in round 1: the test would not see the coupling"
    assert summary["first_hit_round"] == firsts


def test_sample_mode_hit_is_the_replaced_index_being_drawn():
    """The hit flag is computed independently here from the coupled minibatch positions."""
    run = PairedRun(RunConfig(algo="fedavg", perturb="sample", rounds=10, pairs=4))
    nb = run.nb
    for t in range(10):
        S, rows = run.engine.round_rows(t)
        rec = run.step()
        sizes = run.data.n_np[rows]
        idx = batch_positions(0, t, sizes, 10, 16)
        for r in range(4):
            slots = np.flatnonzero(S[r] == nb.perturbed_client[r])
            expected = any((idx[r, 1, sl] == nb.perturbed_position[r]).any() for sl in slots)
            assert rec.hit[r] == expected
    # the replaced sample really differs, and only there
    r0, i0, j0 = 0, nb.perturbed_client[0], nb.perturbed_position[0]
    original, copy_row = run.data.row(i0)[0], run.data.row(nb.perturbed_row[r0])[0]
    differs = (original != copy_row).flatten(1).any(1)
    assert differs.nonzero().flatten().tolist() == [j0]


def test_active_mode_swaps_one_slot_every_round():
    run = PairedRun(RunConfig(algo="fedavg", perturb="client", client_mode="active", pairs=3))
    for t in range(5):
        _, rows = run.engine.round_rows(t)
        different = rows[:, 0] != rows[:, 1]
        assert (different.sum(axis=1) == 1).all()
        assert np.isin(rows[:, 1][different], run.nb.replacement_pool).all()


def test_batched_engine_equals_a_plain_loop_over_clients():
    """Reference: one nn.Module per client, torch.optim.SGD, state averaging, same coupled indices."""
    cfg = RunConfig(algo="fedavg", perturb="client", pairs=2, rounds=2, local_steps=3, batch_size=8,
                    dtype="float64", lr=0.1, weight_decay=0.01)
    run = PairedRun(cfg)
    data, template = run.data, run.model.module
    x = run.engine.x.clone()
    expected = torch.empty_like(x)
    for t in range(cfg.rounds):
        _, rows = run.engine.round_rows(t)
        idx = batch_positions(cfg.seed, t, data.n_np[rows], cfg.local_steps, cfg.batch_size)
        for r in range(cfg.pairs):
            for j in range(2):
                states = []
                for slot in range(rows.shape[2]):
                    model = copy.deepcopy(template)
                    torch.nn.utils.vector_to_parameters(x[r, j].clone(), model.parameters())
                    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
                    row = rows[r, j, slot]
                    for k in range(cfg.local_steps):
                        batch = torch.as_tensor(idx[r, j, slot, k])
                        opt.zero_grad()
                        xr, yr = data.row(row)
                        loss = torch.nn.functional.cross_entropy(model(xr[batch]), yr[batch])
                        loss.backward()
                        opt.step()
                    states.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach())
                expected[r, j] = torch.stack(states).mean(0)
        x = expected.clone()
        run.step()
        torch.testing.assert_close(run.engine.x, expected, rtol=0, atol=1e-12)
    assert run.engine.discrepancy().min() > 0


def test_one_sort_for_both_trajectories_gives_the_per_trajectory_indices():
    """batch_positions sorts once when both trajectories' clients are equally large; the indices must be the
    ones sorting each trajectory separately gives (the general path), ragged sizes and several epochs included."""
    from stabkit.engine.sampling import _positions
    rng = np.random.default_rng(3)
    sizes = rng.integers(7, 40, (3, 1, 5)).repeat(2, axis=1)
    shared = batch_positions(11, 4, sizes, 6, 9)  # 54 samples per client: several epochs for the small ones
    assert shared.shape == (3, 2, 5, 6, 9) and shared.flags.writeable
    assert np.array_equal(shared, _positions(11, 4, sizes, 6, 9))
    sizes[1, 1, 2] += 3  # a neighbour with more samples: the general path, trajectory 0 unaffected
    ragged = batch_positions(11, 4, sizes, 6, 9)
    assert np.array_equal(ragged[:, 0], shared[:, 0]) and not np.array_equal(ragged[1, 1, 2], shared[1, 1, 2])


def _reference_positions(seed, t, sizes, local_steps, batch):
    """The positions as the module docstring defines them, written plainly: per client and epoch, the stable
    sort order of the position keys, padding last; step k takes entries k*B .. k*B+B-1 of the epochs."""
    from stabkit.engine import rng as keyed
    R, T, s = sizes.shape
    n_max = int(sizes.max())
    epochs = -(-local_steps * batch // int(sizes.min()))
    keys = keyed.hash_keys(seed, "batch", np.arange(R)[:, None, None, None, None], t,
                           np.arange(s)[None, None, :, None, None], np.arange(epochs)[None, None, None, :, None],
                           np.arange(n_max)[None, None, None, None, :])
    out = np.empty((R, T, s, local_steps * batch), dtype=np.int64)
    for r, j, c in np.ndindex(R, T, s):
        n = sizes[r, j, c]
        order = np.concatenate([np.argsort(keys[r, 0, c, e, :n], kind="stable") for e in range(epochs)])
        out[r, j, c] = order[:local_steps * batch]
    return out.reshape(R, T, s, local_steps, batch)


@pytest.mark.parametrize("ties", [False, True])
def test_minibatch_positions_equal_the_plain_definition(ties, monkeypatch):
    """The fast positions (unstable sort checked for ties, flat takes) equal the plain stable-sort definition:
    equal and ragged sizes, one and several epochs, and keys that tie (forced: the stable sort decides)."""
    from stabkit.engine import rng as keyed
    from stabkit.engine import sampling
    if ties:
        real = keyed.hash_keys
        monkeypatch.setattr(keyed, "hash_keys", lambda *a: real(*a) % np.uint64(7))  # many ties per row
    gen = np.random.default_rng(5)
    for sizes in (np.full((3, 2, 4), 30), gen.integers(5, 40, (3, 2, 4)), gen.integers(5, 40, (2, 1, 6))):
        for K, B in ((3, 10), (7, 9)):
            got = sampling._positions(2, 9, sizes, K, B)
            assert np.array_equal(got, _reference_positions(2, 9, sizes, K, B)), (sizes, K, B)
