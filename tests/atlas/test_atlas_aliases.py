"""Aliases are found by comparing updates, not names: every built-in algorithm runs three rounds at its
defaults (digits MLP, minibatches, client perturbation, weight decay), and the pairs whose models are equal
bit for bit after every round are exactly :data:`stabkit.atlas.aliases.ALIASES`; the atlas shows each once."""
import itertools

import torch

from stabkit import RunConfig
from stabkit.algorithms import ALGORITHMS
from stabkit.atlas.aliases import ALIASES, alias_note, fold_aliases
from stabkit.atlas.names import algo_title
from stabkit.run.experiment import PairedRun

RUN = dict(rounds=3, pairs=1, weight_decay=1e-3, eval_every=3, constants=False)


def _trajectory(algo: str) -> torch.Tensor:
    run = PairedRun(RunConfig(algo=algo, **RUN))
    xs = []
    for _ in range(RUN["rounds"]):
        run.step()
        xs.append(run.engine.x.clone())
    return torch.stack(xs)


def test_the_alias_table_is_exactly_the_algorithms_with_equal_updates_at_their_defaults():
    xs = {a: _trajectory(a) for a in ALGORITHMS}
    assert all(x[-1, :, 0].ne(x[-1, :, 1]).any() for x in xs.values())  # the pairs have moved apart
    equal = {frozenset((a, b)) for a, b in itertools.combinations(xs, 2) if torch.equal(xs[a], xs[b])}
    assert equal == {frozenset((kept, twin)) for kept, (twin, _) in ALIASES.items()}
    assert not torch.equal(xs["fedavgm"], xs["fedavg"])  # control: momentum at beta 0.9 is not FedAvg


def test_an_alias_is_shown_once_under_both_names():
    assert fold_aliases(["fedavg", "fosm", "fedavgm"]) == (["fedavg", "fedavgm"], [("fosm", "fedavgm")])
    assert fold_aliases(["fosm", "fedavg"]) == (["fosm", "fedavg"], [])  # alone, FOSM keeps its own name
    assert algo_title("fedavgm") == "FedAvgM (= FOSM, ν = 1)" and alias_note("fedavg") == ""
