"""stabkit.testing: each assertion passes on a curve with the property and fails, with the numbers, on one
without it; runs are accepted as arrays, DataFrames from load_run and run directories."""
import re

import numpy as np
import pandas as pd
import pytest

from stabkit import load_run
from stabkit.testing import assert_below, assert_grows, assert_grows_linearly, assert_saturates

T, PAIRS = 200, 8
t = np.arange(T + 1, dtype=float)


def pairs(curve, seed=0, noise=0.01):
    """PAIRS copies of ``curve`` with a per-pair level factor (sd 5%) and per-round noise, zero at t = 0."""
    rng = np.random.default_rng(seed)
    out = curve * (1 + 0.05 * rng.standard_normal((PAIRS, 1))) + noise * rng.standard_normal((PAIRS, T + 1))
    out[:, 0] = 0.0
    return out


LINEAR = pairs(0.02 * t)                          # D_200 ~ 4, still growing
SATURATING = pairs(3.0 * (1 - 0.95 ** t), seed=1)  # level 3, settled by round 100


def num(x, digits=4):
    """The number as the failure message prints it, escaped for ``match``."""
    return re.escape(f"{x:.{digits}g}")


def write_run(path, curves):
    """A minimal run directory: metrics.csv with round, pair, disc."""
    path.mkdir()
    rows = [{"round": r, "pair": p, "disc": curves[p, r]} for p in range(len(curves)) for r in range(curves.shape[1])]
    pd.DataFrame(rows).to_csv(path / "metrics.csv", index=False)
    return path


def test_accepts_arrays_dataframes_and_directories(tmp_path):
    run = write_run(tmp_path / "sat", SATURATING)
    for form in (SATURATING, load_run(run), run, str(run)):
        assert_saturates(form)
    assert_grows(SATURATING[0] + 0.02 * t)  # one curve [T+1] is one pair: no standard error, margin 0


def test_saturates():
    assert_saturates(SATURATING)
    m = LINEAR.mean(axis=0)
    change = abs(m[200] - m[100]) / m[200]
    assert change == pytest.approx(0.5, abs=0.02)
    with pytest.raises(AssertionError, match=rf"(?s)\[FAILED\] relative change over rounds 100\.\.200: "
                       rf"\|D_200 - D_100\| / D_200 = \|{num(m[200])} - {num(m[100])}\| / {num(m[200])} = "
                       rf"{num(change)} \(needs < 0\.1\).*\[FAILED\] BIC\(saturating\) - BIC\(linear\) = .*"
                       rf"law .*R².*BIC.*linear +c=0\.02"):
        assert_saturates(LINEAR)


def test_saturates_names_the_failing_condition():
    """A curve still moving in its last half but clearly curved: only the plateau condition fails."""
    slow = pairs(3.0 * (1 - 0.99 ** t), seed=2)
    with pytest.raises(AssertionError, match=r"\[FAILED\] relative change.*\n  \[ok\] BIC\(saturating\)") as e:
        assert_saturates(slow)
    assert "saturating   c=" in str(e.value)


def test_grows():
    assert_grows(LINEAR)
    half, end = SATURATING[:, 100], SATURATING[:, 200]
    excess = end - 1.15 * half
    se = excess.std(ddof=1) / np.sqrt(PAIRS)
    with pytest.raises(AssertionError, match=rf"D_200 / D_100 = {num(end.mean())} / {num(half.mean())} = "
                       rf"{num(end.mean() / half.mean())} \(needs >= 1\.15\); excess D_200 - 1\.15\*D_100 = "
                       rf"{num(excess.mean())} ± {num(se, 3)} \(se\), needs > 3 se = {num(3 * se)}"):
        assert_grows(SATURATING)


def test_grows_within_noise_is_not_growth():
    """Every pair has D_100 = 1 and D_200 = 1.2 + 0.3 z (z standardised over pairs): the mean ratio 1.2 beats
    1.15, but the excess 0.05 is below 3 se = 3 * 0.3 / sqrt(8) = 0.318."""
    z = np.random.default_rng(4).standard_normal(PAIRS)
    ends = 1.2 + 0.3 * (z - z.mean()) / z.std(ddof=1)
    noisy = np.stack([np.interp(t, [0, 100, 200], [0, 1, e]) for e in ends])
    with pytest.raises(AssertionError, match=r"D_200 / D_100 = 1\.2 / 1 = 1\.2 \(needs >= 1\.15\); excess "
                       r"D_200 - 1\.15\*D_100 = 0\.05 ± 0\.106 \(se\), needs > 3 se = 0\.3182"):
        assert_grows(noisy)
    assert_grows(noisy, margin_se=0)


def test_grows_linearly():
    assert_grows_linearly(LINEAR)
    with pytest.raises(AssertionError, match=r"\[FAILED\] BIC\(linear\) - min BIC = \d+\.\d\d \(needs <= 2; "
                       r"best law: saturating\)\n  \[FAILED\] power-law exponent p = 0\.\d+ "
                       r"\(needs in \[0\.8, 1\.2\]\)"):
        assert_grows_linearly(SATURATING)


def test_grows_linearly_rejects_a_power_law():
    """t**1.5 is not linear: the power fit's exponent is reported."""
    with pytest.raises(AssertionError, match=r"power-law exponent p = 1\.5\d* \(needs in") as e:
        assert_grows_linearly(pairs(0.001 * t ** 1.5, seed=5))
    assert "best law: power" in str(e.value)


def test_below(tmp_path):
    assert_below(SATURATING, LINEAR)
    assert_below(SATURATING, write_run(tmp_path / "lin", LINEAR), at=200)
    a, b = LINEAR[:, 200], SATURATING[:, 200]
    se_a, se_b = a.std(ddof=1) / np.sqrt(PAIRS), b.std(ddof=1) / np.sqrt(PAIRS)
    diff, se = b.mean() - a.mean(), np.hypot(se_a, se_b)
    assert diff == pytest.approx(-1.0, abs=0.2)
    with pytest.raises(AssertionError, match=rf"D_200 = {num(a.mean())} ± {num(se_a, 3)} \(se\) vs other "
                       rf"{num(b.mean())} ± {num(se_b, 3)}: difference {num(diff)} ± {num(se, 3)}, "
                       rf"needs > 3 se = {num(3 * se)}"):
        assert_below(LINEAR, SATURATING)
    # early on the linear run is the lower one
    assert_below(LINEAR, SATURATING, at=20)
    with pytest.raises(ValueError, match="round at=500"):
        assert_below(LINEAR, SATURATING, at=500)
