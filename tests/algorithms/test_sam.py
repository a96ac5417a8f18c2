"""The shared SAM arithmetic (stabkit.algorithms.sam).
"""
import numpy as np
import torch


def test_perturbations_are_zero_for_a_zero_direction():
    """The norm guard: a zero gradient (or delta) gives eps = 0, not NaN."""
    from stabkit.algorithms.sam import adaptive_perturbation, l2_perturbation

    a = torch.zeros(1, 2, 3, 4, dtype=torch.float64)
    a[0, 0, 1] = torch.tensor([3.0, 0.0, 4.0, 0.0])
    eps = l2_perturbation(a, 0.5)
    assert torch.equal(eps[0, 1], torch.zeros(3, 4)) and torch.equal(eps[0, 0, 0], torch.zeros(4))
    np.testing.assert_allclose(eps[0, 0, 1].numpy(), [0.3, 0.0, 0.4, 0.0], rtol=0, atol=1e-15)
    eps = adaptive_perturbation(a, torch.ones_like(a), 0.5, 0.01)
    assert torch.isfinite(eps).all() and torch.equal(eps[0, 1], torch.zeros(3, 4))

