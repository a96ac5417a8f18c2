"""Leave-one-out neighbours (``remove-client``, ``remove-sample``): the coupling's law, proved empirically.

The law: B's cohort must be a uniform s-subset of the M - 1 remaining clients, and B's epoch permutation of the
client that lost a sample a uniform permutation of its n - 1 samples. Each test draws many independent
cohorts / permutations (one per pair counter) and checks every cell's empirical frequency against the exact
probability within 5 binomial standard errors sqrt(p (1 - p) / N); a deliberately biased coupling fails the
same check, so the test has the power to see a wrong law.
"""
import itertools
import math

import numpy as np
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.engine.perturbation import removed_cohort
from stabkit.engine.sampling import batch_positions, client_order
from stabkit.errors import ConfigError
from stabkit.run.experiment import PairedRun
from stabkit.testing.problems import tiny_task
from tests.helpers import A3, B3

M, S, REMOVED, DRAWS = 5, 2, 3, 60_000


def _within_binomial_error(counts: dict, cells: list, draws: int, z: float = 5.0) -> bool:
    p = 1.0 / len(cells)
    se = math.sqrt(p * (1 - p) / draws)
    return set(counts) <= set(cells) and all(abs(counts.get(c, 0) / draws - p) <= z * se for c in cells)


def _cohorts():
    order = client_order(seed=7, t=0, pairs=DRAWS, num_clients=M)  # one independent permutation per pair
    A = order[:, :S]
    return A, removed_cohort(np.full(DRAWS, REMOVED), A, order), order


def test_remove_client_cohorts_are_uniform_subsets_of_the_remaining_clients():
    A, B, _ = _cohorts()
    cells = [c for c in itertools.combinations(range(M), S) if REMOVED not in c]  # C(4, 2) = 6 subsets
    counts = {tuple(int(v) for v in k): int(n) for k, n in zip(*np.unique(np.sort(B, 1), axis=0,
                                                                           return_counts=True))}
    assert len(cells) == math.comb(M - 1, S)
    assert _within_binomial_error(counts, cells, DRAWS), counts
    # A's own law is uniform over all C(5, 2) = 10 subsets, and the coupling is as tight as it can be: B equals
    # A slot by slot unless A sampled the removed client, and then differs in that slot only
    a_counts = {tuple(int(v) for v in k): int(n) for k, n in zip(*np.unique(np.sort(A, 1), axis=0,
                                                                             return_counts=True))}
    assert _within_binomial_error(a_counts, list(itertools.combinations(range(M), S)), DRAWS)
    hit = (A == REMOVED).any(1)
    assert (B[~hit] == A[~hit]).all()
    assert ((B[hit] != A[hit]).sum(1) == 1).all() and not (B == REMOVED).any()
    # P(A samples the removed client) = s / M exactly; the substitute is uniform over the M - s others
    assert abs(hit.mean() - S / M) <= 5 * math.sqrt(S / M * (1 - S / M) / DRAWS)
    sub = B[hit][A[hit] == REMOVED]
    assert (sub[:, None] != A[hit]).all()
    given = (np.sort(A, 1) == [0, REMOVED]).all(1)  # A sampled {0, removed}: B's substitute uniform on {1, 2, 4}
    counts = {(int(k),): int(n) for k, n in zip(*np.unique(B[given][A[given] == REMOVED], return_counts=True))}
    assert _within_binomial_error(counts, [(1,), (2,), (4,)], int(given.sum()))


def test_a_biased_coupling_fails_the_same_check():
    """Substituting the smallest-numbered client A did not sample (instead of a uniform one) keeps B's cohorts
    without the removed client but gives them the wrong law: the check sees it."""
    A, _, _ = _cohorts()
    biased = A.copy()
    for r in np.flatnonzero((A == REMOVED).any(1)):
        free = [c for c in range(M) if c not in A[r] and c != REMOVED]
        biased[r, A[r] == REMOVED] = free[0]
    counts = {tuple(int(v) for v in k): int(n) for k, n in zip(*np.unique(np.sort(biased, 1), axis=0,
                                                                           return_counts=True))}
    cells = [c for c in itertools.combinations(range(M), S) if REMOVED not in c]
    assert not _within_binomial_error(counts, cells, DRAWS)


def test_remove_sample_epoch_is_a_uniform_permutation_coupled_to_a():
    """A's client has n = 5 samples, B's copy lacks sample j* = 2. One local step of batch 4 is B's whole first
    epoch: its 4! = 24 orders are equally likely, and it is A's epoch order with j* left out."""
    n, j, draws = 5, 2, 48_000
    sizes = np.broadcast_to(np.array([n, n - 1])[None, :, None], (draws, 2, 1)).copy()
    skip = np.broadcast_to(np.array([n, j])[None, :, None], (draws, 2, 1)).copy()
    idx = batch_positions(3, 0, sizes, local_steps=1, batch=n - 1, skip=skip)[:, :, 0, 0]  # [draws, 2, 4]
    b = idx[:, 1]
    counts = {tuple(int(v) for v in k): int(c) for k, c in zip(*np.unique(b, axis=0, return_counts=True))}
    assert _within_binomial_error(counts, list(itertools.permutations(range(n - 1))), draws)
    full = batch_positions(3, 0, sizes[:, :1].repeat(2, 1), local_steps=1, batch=n)[:, 0, 0, 0]  # A's epoch
    a_without = np.array([[p - (p > j) for p in row if p != j] for row in full])
    assert (a_without == b).all()


def _removal_run(perturb: str, **kw) -> PairedRun:
    return PairedRun(RunConfig(perturb=perturb, rounds=6, pairs=3, local_steps=3, eval_every=3, constants=False,
                               task_options=TaskOptions(clients=8, samples_per_client=20), **kw))


def test_engine_rounds_follow_the_coupling_and_b_uses_its_own_population():
    run = _removal_run("remove-client", clients_per_round=3, algo="scaffold")
    eng, gone = run.engine, run.nb.perturbed_client
    hits = 0
    for t in range(40):
        S, rows = eng.round_rows(t)
        assert (rows[:, 0] == S).all() and not (rows[:, 1] == gone[:, None]).any()
        hit = (S == gone[:, None]).any(1)
        hits += hit.sum()
        assert (rows[~hit, 1] == S[~hit]).all() and ((rows[hit, 1] != S[hit]).sum(1) == 1).all()
        assert all(len(set(r)) == 3 for r in rows[:, 1])
    assert 0 < hits < 40 * 3
    assert eng.num_clients.flatten().tolist() == [8, 7]  # SCAFFOLD's s / M reads B's M - 1
    w = run.evaluator.population_weights(1)  # B of pair 0: 1/7 per remaining client, nothing on the removed one
    owner = run.data.flat_owner
    assert float(w[owner == int(gone[0])].sum()) == 0.0
    assert math.isclose(float(w.sum()), 1.0, rel_tol=1e-6)
    assert math.isclose(float(w[owner == (int(gone[0]) + 1) % 8].sum()), 1 / 7, rel_tol=1e-6)


def test_remove_sample_row_lacks_exactly_the_sample_and_runs_separate_after_the_hit(tmp_path):
    run = _removal_run("remove-sample")
    nb, data = run.nb, run.data
    for r in range(3):
        i, j, row = int(nb.perturbed_client[r]), int(nb.perturbed_position[r]), int(nb.perturbed_row[r])
        xa, xb = data.row(i)[0], data.row(row)[0]
        assert len(xb) == len(xa) - 1 and torch.equal(xb, torch.cat([xa[:j], xa[j + 1:]]))
    first = {}
    for t in range(1, 7):
        rec = run.step()
        for r in np.flatnonzero(rec.hit):
            first.setdefault(int(r), t)
        disc = run.engine.discrepancy()
        for r in range(3):
            assert (disc[r] == 0) == (r not in first), (t, r, disc)


def test_removing_the_only_sample_of_a_client_is_refused():
    """Client 2 of the three-client problem holds one sample; a pair that draws it is refused in one line."""
    cfg = RunConfig(perturb="remove-sample", pairs=40, rounds=1, batch_size="full", clients_per_round=2,
                    constants=False, task_options=TaskOptions(clients=3, heldout_clients=2))
    with pytest.raises(ConfigError, match=r"drawn client 2 has one training sample"):
        PairedRun(cfg, task=tiny_task(A3, B3))
    run = PairedRun(cfg.replace(pairs=40, task_options=TaskOptions(clients=2, heldout_clients=2)), task=tiny_task())
    assert len(run.nb.extra) == 40  # two samples per client: every pair's neighbour has one


@pytest.mark.parametrize("kw,text", [
    (dict(perturb="remove-client", task_options=TaskOptions(clients=1)), "one client"),
    (dict(perturb="remove-client", participation=1.0, task_options=TaskOptions(clients=6)),
     "--clients-per-round 5"),
])
def test_removal_refusals(kw, text):
    with pytest.raises(ConfigError, match=text):
        RunConfig(**kw)
