"""A DP run as a run: resumed to more rounds it writes the same bytes (the noise is counter-based), its
privacy.json follows the rounds done, and `stabkit bounds` lists the DP => stability bound with e^eps - 1 + delta."""
import json
import math

import pytest

from stabkit import RunConfig
from stabkit.analysis.run_analysis import analyze
from stabkit.config.taskoptions import TaskOptions
from stabkit.privacy.accountant import Schedule, epsilons
from stabkit.run.experiment import resume_pair, run_pair


def _cfg(**kw):
    base = dict(algo="fedavg", wrap="dp:clip=0.2,noise_multiplier=1.5", task="quadratic", pairs=2, rounds=8,
                local_steps=3, checkpoint_every=3, clients_per_round=4, perturb="client", client_mode="population",
                constants=False, task_options=TaskOptions(clients=8, samples_per_client=20))
    return RunConfig(**{**base, **kw})


def test_a_dp_run_resumed_to_more_rounds_matches_an_uninterrupted_one(tmp_path):
    run_pair(_cfg(), out=tmp_path / "full")
    run_pair(_cfg(rounds=5), out=tmp_path / "short")
    short = json.loads((tmp_path / "short" / "privacy.json").read_text())
    assert short["schedule"]["rounds"] == 5
    resume_pair(tmp_path / "short", rounds=8)
    for f in ("metrics.csv", "privacy.json"):
        assert (tmp_path / "full" / f).read_bytes() == (tmp_path / "short" / f).read_bytes(), f
    full = json.loads((tmp_path / "full" / "privacy.json").read_text())
    assert full["epsilon_accountant"] == epsilons(Schedule(8, 8, 4, 0.2, 1.5), 1e-5)["epsilon"]
    assert all(m["epsilon"] <= full["epsilon_accountant"] for m in full["measured_per_pair"])


def test_bounds_lists_the_dp_stability_bound_for_a_wrapped_run(tmp_path):
    run_pair(_cfg(rounds=3), out=tmp_path / "run")
    rows = {r["bound"]: r for r in analyze(tmp_path / "run", bootstrap=0).bound_rows()}
    dp = rows["dp.stability"]
    eps = epsilons(Schedule(3, 8, 4, 0.2, 1.5), 1e-5)["epsilon"]
    assert dp["quantity"] == "gen_gap"
    assert dp["bound_T"] == pytest.approx(math.exp(eps) - 1 + 1e-5, rel=1e-12)
    assert dp["holds"] is True
    assert {"fedsagd.global", "hardt.sgd"} <= set(rows)  # FedAvg's own bounds stay beside it


def test_no_privacy_file_and_no_dp_bound_without_dp(tmp_path):
    run_pair(_cfg(rounds=2, wrap=None), out=tmp_path / "run")
    assert not (tmp_path / "run" / "privacy.json").exists()
    assert "dp.stability" not in {r["bound"] for r in analyze(tmp_path / "run", bootstrap=0).bound_rows()}
