"""Coupled augmentation: the crop/flip arithmetic, identical draws for both runs, coupling preserved."""
import numpy as np
import torch

from stabkit import RunConfig
from stabkit.engine import rng
from stabkit.engine.augment import PAD, crop_flip
from stabkit.run.experiment import PairedRun


def test_crop_flip_matches_a_numpy_reference_and_is_shared_by_both_runs():
    K, R, s, B, C, H, W = 2, 2, 3, 4, 2, 6, 5
    base = torch.arange(K * R * s * B * C * H * W, dtype=torch.float64).reshape(K, R, 1, s, B, C, H, W)
    x = base.expand(K, R, 2, s, B, C, H, W).clone()  # both trajectories hold the same samples
    out = crop_flip(x, seed=7, t=3, steps=np.array([4, 9])).numpy()
    assert np.array_equal(out[:, :, 0], out[:, :, 1])
    flips, shifts = set(), set()
    for k, step in enumerate((4, 9)):
        for r in range(R):
            for sl in range(s):
                for b in range(B):
                    key = (step, r, 3, sl, b)
                    flip = rng.uniform(7, "augment-flip", *key) < 0.5
                    dy = int(rng.randint(7, "augment-dy", 2 * PAD + 1, *key))
                    dx = int(rng.randint(7, "augment-dx", 2 * PAD + 1, *key))
                    img = np.pad(base[k, r, 0, sl, b].numpy(), ((0, 0), (PAD, PAD), (PAD, PAD)))
                    ref = img[:, dy:dy + H, dx:dx + W]
                    ref = ref[:, :, ::-1] if flip else ref
                    assert np.array_equal(out[k, r, 0, sl, b], ref)
                    flips.add(bool(flip))
                    shifts.add((dy, dx))
    assert flips == {True, False} and len(shifts) > 10  # the draws really vary across positions


def _disc(cfg):
    run = PairedRun(cfg)
    out = []
    for t in range(cfg.rounds):
        rec = run.step()
        out.append((run.engine.discrepancy().copy(), rec.hit.copy()))
    return run, out


def test_null_pair_with_augmentation_is_exactly_zero_and_augmentation_acts():
    common = dict(model="cnn", rounds=3, pairs=2, local_steps=3, perturb="none", dtype="float64")
    aug, rows = _disc(RunConfig(augment="crop_flip", **common))
    assert all((d == 0).all() for d, _ in rows)
    plain, _ = _disc(RunConfig(**common))
    assert not torch.equal(aug.engine.x, plain.engine.x)


def test_sample_perturbation_stays_coupled_under_augmentation():
    cfg = RunConfig(model="cnn", augment="crop_flip", perturb="sample", rounds=12, pairs=3, local_steps=3)
    _, rows = _disc(cfg)
    disc = np.array([d for d, _ in rows])
    hit = np.array([h for _, h in rows])
    for p in range(cfg.pairs):
        first = np.flatnonzero(hit[:, p])
        if len(first) == 0:
            assert (disc[:, p] == 0).all()
            continue
        assert (disc[: first[0], p] == 0).all() and (disc[first[0]:, p] > 0).all()
