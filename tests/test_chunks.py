"""Chunked rounds (stabkit.engine.paired.CHUNK_BYTES): a CPU round runs its pairs in chunks of bounded client
tensors; every op is per model, so the metrics are the same bit for bit."""
import numpy as np
import pytest
import torch

import stabkit.engine.paired as paired
from stabkit import RunConfig
from stabkit.run.experiment import PairedRun

ROUNDS = 3


def _rounds(monkeypatch, chunk_pairs, algo, perturb, **kw):
    """Records, logged rows, final models and carried state after ROUNDS rounds of 5 pairs, in chunks of
    ``chunk_pairs``: local discrepancies logged in round 2, the clients kept in round 3 (a sharpness round)."""
    run = PairedRun(RunConfig(algo=algo, perturb=perturb, pairs=5, rounds=ROUNDS, constants=False,
                              local_rounds=(1,), sharpness_rounds=(ROUNDS,), **kw))
    per_pair = 2 * run.engine.s * run.engine.x.shape[-1] * run.engine.x.element_size()
    monkeypatch.setattr(paired, "CHUNK_BYTES", chunk_pairs * per_pair)
    assert run.engine.pairs_per_chunk() == chunk_pairs
    recs = [run.step() for _ in range(ROUNDS)]
    return recs, run


@pytest.mark.parametrize("algo,perturb", [("fedavg", "sample"), ("scaffold", "client"), ("feddyn", "sample"),
                                          ("mimelite", "client"), ("fedsam", "client"), ("fedsagd", "sample")])
def test_chunked_rounds_equal_one_batch_bit_for_bit(monkeypatch, algo, perturb):
    whole, run1 = _rounds(monkeypatch, 5, algo, perturb)
    chunked, run2 = _rounds(monkeypatch, 2, algo, perturb)  # chunks of 2, 2 and 1 pairs
    e1, e2 = run1.engine, run2.engine
    for logged in ("rows", "local_rows"):  # the metrics and local logs, every column
        a, b = getattr(run1, logged), getattr(run2, logged)
        assert len(a) == len(b) > 0 and all(r1.keys() == r2.keys() and all(np.array_equal(r1[k], r2[k]) for k in r1)
                                            for r1, r2 in zip(a, b)), logged
    assert torch.equal(e1.x, e2.x) and not torch.equal(e1.x[:, 0], e1.x[:, 1])
    for kind in ("server", "client_state"):
        a, b = getattr(e1, kind), getattr(e2, kind)
        assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a), kind
    assert len(whole[1].local) == 11 and whole[2].clients is not None  # K + 1 local points; final clients kept
    for r1, r2 in zip(whole, chunked):
        assert np.array_equal(r1.rows, r2.rows) and np.array_equal(r1.hit, r2.hit)
        assert np.array_equal(r1.theta_max, r2.theta_max) and np.array_equal(r1.theta_rms, r2.theta_rms)
        assert r1.grad_evals == r2.grad_evals
        assert len(r1.local) == len(r2.local)
        for a, b in zip(r1.local, r2.local):
            assert a[0] == b[0] and all(np.array_equal(x, y) for x, y in zip(a[1:], b[1:]))
        assert (r1.clients is None) == (r2.clients is None)
        assert r1.clients is None or torch.equal(r1.clients, r2.clients)


def test_chunks_bound_the_client_tensors_and_a_large_model_keeps_one_batch(monkeypatch):
    run = PairedRun(RunConfig(pairs=8, rounds=1, constants=False))  # the default digits run: 1.5 MB, one batch
    assert run.engine.pairs_per_chunk() == 8
    big = PairedRun(RunConfig(pairs=245, rounds=1, constants=False, perturb="sample"))  # 47 MB tensors
    per_pair = 2 * big.engine.s * big.engine.x.shape[-1] * 4
    assert big.engine.pairs_per_chunk() == paired.CHUNK_BYTES // per_pair == 43
    monkeypatch.setattr(paired, "CHUNK_BYTES", per_pair - 1)  # one pair's clients do not fit: no chunks
    assert big.engine.pairs_per_chunk() == 245


def test_conv_net_rounds_in_chunks_equal_one_batch_bit_for_bit(monkeypatch):
    from benchmarks.workloads import workloads

    w = workloads(0.3, "cpu")["W2"]  # LeNet-5 on 1x28x28 images, grouped convolutions over the clients

    def final(chunk_pairs):
        run = PairedRun(w.config(4), task=w.task())
        per_pair = 2 * run.engine.s * run.engine.x.shape[-1] * run.engine.x.element_size()
        monkeypatch.setattr(paired, "CHUNK_BYTES", chunk_pairs * per_pair)
        recs = [run.step() for _ in range(2)]
        return run.engine.x, recs[-1].theta_max

    (x1, n1), (x2, n2) = final(4), final(1)
    assert torch.equal(x1, x2) and np.array_equal(n1, n2)
