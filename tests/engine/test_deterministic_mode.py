"""Every computation behind a logged number runs with deterministic kernels (stabkit.engine.determinism).

On a GPU, round 0 used to be evaluated before the round loop turned the mode on, and two identical runs
differed in the 7th digit of round 0's r_u and grad_norm_sq (H100). The mode is invisible on the CPU's
results, so these tests watch the mode itself at every evaluation and every engine round.
"""
import pytest
import torch

from stabkit import RunConfig, TaskOptions
from stabkit.engine.evaluation import Evaluator
from stabkit.engine.paired import PairedEngine
from stabkit.run.experiment import PairedRun, run_pair

CFG = dict(task="digits", pairs=1, rounds=2, clients_per_round=2, local_steps=2, batch_size=8,
           task_options=TaskOptions(clients=4), constants=False, local_rounds=())


@pytest.fixture(autouse=True)
def mode_off():
    """Start with the mode off (other tests may leave it on) and put the session's mode back after."""
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    yield
    torch.use_deterministic_algorithms(before)


def _spy(monkeypatch):
    seen = []
    for cls, name in ((Evaluator, "evaluate"), (PairedEngine, "step")):
        original = getattr(cls, name)

        def watched(self, *a, _original=original, _name=name, **k):
            seen.append((_name, torch.are_deterministic_algorithms_enabled()))
            return _original(self, *a, **k)
        monkeypatch.setattr(cls, name, watched)
    return seen


def test_run_evaluates_round_zero_and_every_round_in_deterministic_mode(monkeypatch, tmp_path):
    seen = _spy(monkeypatch)
    run_pair(RunConfig(**CFG), out=tmp_path / "run")
    assert [n for n, _ in seen].count("evaluate") == 3 and [n for n, _ in seen].count("step") == 2
    assert all(mode for _, mode in seen), seen
    assert not torch.are_deterministic_algorithms_enabled()  # the caller's mode is put back


def test_stepping_a_run_by_hand_is_deterministic_too(monkeypatch):
    seen = _spy(monkeypatch)
    run = PairedRun(RunConfig(**CFG))
    run.step()
    assert seen == [("evaluate", True), ("step", True), ("evaluate", True)]
    assert not torch.are_deterministic_algorithms_enabled()


def test_fresh_tensors_are_not_filled_inside_and_the_callers_flags_come_back():
    """Inside the block the mode is on and torch's NaN fill of fresh tensors off (every op writes its whole
    output; the fill was 14% of a ResNet-18-GN round); both flags are put back as the caller had them."""
    import torch.utils.deterministic as flags

    from stabkit.engine.determinism import deterministic
    for fill in (True, False):
        flags.fill_uninitialized_memory = fill
        with deterministic():
            assert torch.are_deterministic_algorithms_enabled() and not flags.fill_uninitialized_memory
        assert flags.fill_uninitialized_memory is fill and not torch.are_deterministic_algorithms_enabled()
    flags.fill_uninitialized_memory = True
