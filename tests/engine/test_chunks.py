"""Chunked rounds (stabkit.engine.paired.CHUNK_BYTES): a CPU round runs its pairs in chunks of bounded client
tensors. Every op is per model, so a chunk computes what the whole batch computes for its models; but the
kernels see fewer models per call, and oneDNN and MKL may pick another kernel for another shape, so the numbers
are equal to rounding (integers, sampled clients and hit masks, exactly). The same chunking run twice is
identical (tests/engine/test_pairs.py, determinism)."""
import numpy as np
import pytest
import torch

import stabkit.engine.paired as paired
from stabkit import RunConfig
from stabkit.run.experiment import PairedRun
from tests.helpers import ROUNDING_ULPS, assert_equal_to_rounding

ROUNDS = 3
# rounding differences are carried through every local step of every round (10 steps a round here)
ULPS = ROUNDING_ULPS * ROUNDS * 10


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
def test_chunked_rounds_equal_one_batch_to_rounding(monkeypatch, algo, perturb):
    whole, run1 = _rounds(monkeypatch, 5, algo, perturb)
    chunked, run2 = _rounds(monkeypatch, 2, algo, perturb)  # chunks of 2, 2 and 1 pairs
    e1, e2 = run1.engine, run2.engine
    for logged in ("rows", "local_rows"):  # the metrics and local logs, every column
        a, b = getattr(run1, logged), getattr(run2, logged)
        assert len(a) == len(b) > 0, logged
        for r1, r2 in zip(a, b):
            assert r1.keys() == r2.keys(), logged
            for k in r1:
                assert_equal_to_rounding(r2[k], r1[k], ULPS, f"{logged} {k}")
    assert_equal_to_rounding(e2.x, e1.x, ULPS, "x")
    assert not torch.equal(e1.x[:, 0], e1.x[:, 1])
    for kind in ("server", "client_state"):
        a, b = getattr(e1, kind), getattr(e2, kind)
        assert a.keys() == b.keys(), kind
        for n in a:
            assert_equal_to_rounding(b[n], a[n], ULPS, f"{kind} {n}")
    assert len(whole[1].local) == 11 and whole[2].clients is not None  # K + 1 local points; final clients kept
    for r1, r2 in zip(whole, chunked):
        assert np.array_equal(r1.hit, r2.hit) and r1.grad_evals == r2.grad_evals
        for name in ("rows", "theta_max", "theta_rms"):
            assert_equal_to_rounding(getattr(r2, name), getattr(r1, name), ULPS, name)
        assert len(r1.local) == len(r2.local)
        for a, b in zip(r1.local, r2.local):
            assert a[0] == b[0]
            for x, y in zip(b[1:], a[1:]):
                assert_equal_to_rounding(x, y, ULPS, f"local step {a[0]}")
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


def test_conv_net_rounds_in_chunks_equal_one_batch_to_rounding(monkeypatch):
    from benchmarks.workloads import workloads

    w = workloads(0.3, "cpu")["W2"]  # LeNet-5 on 1x28x28 images, grouped convolutions over the clients

    def final(chunk_pairs):
        run = PairedRun(w.config(4), task=w.task())
        per_pair = 2 * run.engine.s * run.engine.x.shape[-1] * run.engine.x.element_size()
        monkeypatch.setattr(paired, "CHUNK_BYTES", chunk_pairs * per_pair)
        recs = [run.step() for _ in range(2)]
        return run.engine.x, recs[-1].theta_max

    (x1, n1), (x2, n2) = final(4), final(1)
    steps = 2 * w.config(4).local_steps
    assert_equal_to_rounding(x2, x1, ROUNDING_ULPS * steps, "x")
    assert_equal_to_rounding(n2, n1, ROUNDING_ULPS * steps, "theta_max")
