"""Start-up: the listing commands import none of the heavy libraries (each costs 0.2-2 s at start-up)."""
import json
import shutil
import subprocess
import sys

import pytest

HEAVY = ("torch", "pandas", "scipy", "matplotlib", "ray")
PROBE = """
import contextlib, io, sys
from stabkit_cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main({args!r})
    except SystemExit as e:
        assert not e.code, e.code
assert out.getvalue().strip()
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("args", [["--help"], ["algos"], ["presets"], ["models"], ["pair", "--help"],
                                  ["sweep", "--help"], ["bounds", "--help"], ["report", "--help"]])
def test_light_commands_import_no_heavy_library(args):
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"stabkit {' '.join(args)} imported {done.stdout.strip()}"


REFUSALS = [  # refused from the options alone: one line, exit 2, before torch is imported (<= 1 s)
    ["--lr", "nan"], ["--seed", "-1"], ["--rounds", "0"], ["--rounds", str(2 ** 63)], ["--out", ""],
    ["--local-rounds", "0,x"], ["--local-rounds", "100"], ["--preset", "nosuch"], ["--algo", "nosuch"],
    ["--algo", "fedprox", "--hp", "lam=inf"], ["--algo", "fedsagd", "--hp", "beta=0.5", "--hp", "beta=0.9"],
    ["--hp", "nosuch=1"], ["--save-models", "every:0"], ["--participation", "2"], ["--dtype", "float16"],
    ["--config", "missing.yaml"], ["--out", "@file"], ["--out", "@file/sub"], ["--resume", "@empty"],
    ["--resume", "@empty", "--lr", "0.5"], ["--resume", "@empty", "--out", "x"],
    ["--task", "synthetic", "--clients", str(10 ** 8)],
    ["--task", "quadratic", "--quad-dim", str(10 ** 6), "--samples-per-client", str(10 ** 6)],
    ["--task", "cifar10", "--data-dir", "no/such/folder", "--estimate"],
    ["--wrap", "dp:clip=1", "--wrap", "dp:clip=2"], ["--wrap", "dp:clip=1,clip=2"], ["--tensorboard", "@file"],
]
SWEEP = ["sweep", "--out", "@sw", "--axis", "local_steps=1,2", "--quiet"]
ELSEWHERE = [  # the other commands' refusals that the options (and a saved run's files) decide, before torch
    [*SWEEP, "--set", "weight_decay=.inf"], [*SWEEP, "--set", "rounds=10^22"], [*SWEEP, "--set", "seed=-1"],
    [*SWEEP, "--set", "save_models=every:0"], [*SWEEP, "--executor", "ray", "--address", "nohost"],
    [*SWEEP, "--address", "127.0.0.1:6379"], [*SWEEP, "--set", "algo=fedsagd", "--set", "hp.beta=.nan"],
    ["atlas", "--suite", "ci", "--out", "@file"], ["atlas", "--suite", "ci", "--address", "127.0.0.1:6379"],
    ["presets", "fedsagd-cifar10", "--estimate", "--data-dir", "@file"],
    ["sharpness", "@run", "--radius", "inf"], ["sharpness", "@run", "--radius", "0.01,"],
    ["sharpness", "@run", "--probes", "100000000"], ["sharpness", "@run", "--round", "1"],
    ["landscape", "@run", "--span", "nan"], ["landscape", "@run", "--pair", "2"],
    ["landscape", "@run", "--points", "1000000"], ["sharpness", "@missing_model"], ["landscape", "@missing_model"],
    ["sharpness", "@corrupt_config"], ["landscape", "@list_config"], ["sharpness", "@empty_round"],
    ["unlearn", "@run", "--method", "none"], ["unlearn", "@run", "--method", "none", "--format", "xml"],
    ["atlas", "--suite", "nope"], ["atlas", "--suite", "ci", "--algos", "nope"], ["atlas", "--suite", "ci",
                                                                                  "--tune", "lr=-1"],
    ["atlas", "--suite", "ci", "--seeds", "100000", "--dry-run"], ["atlas", "--suite", "ci", "--tensorboard", "@file"],
    [*SWEEP, "--set", "lr=0.1", "--axis", "lr=0.1,0.2"],
    ["audit", "--algo", "dp_fedavg", "--trials", "9"],
]
FLOWER = [  # --algo flwr:... and --flwr-app refusals: flwr is imported, torch is not
    ["--algo", "flwr:Nope"], ["--algo", "flwr:FedAvgM", "--hp", "server_momentum=nan"],
    ["--algo", "flwr:FedAdam", "--hp", "eta=-1"], ["--algo", "flwr:flwr.server.strategy:QFedAvg"],
    ["--algo", "flwr:Krum", "--hp", "num_malicious_nodes=2", "--clients-per-round", "5"],
    ["--algo", "flwr:DifferentialPrivacyServerSideFixedClipping", "--hp", "strategy=flwr.server.strategy:FedAvg",
     "--hp", "noise_multiplier=1", "--hp", "clipping_norm=1"],
    ["--algo", "flwr:FedAvg", "--wrap", "dp:clip=1"],
    ["--flwr-app", "tests.flower_fixtures:good_app", "--lr", "0.1"],
    ["--flwr-app", "tests.flower_fixtures:good_app", "--perturb", "sample"],
    ["--flwr-app", "tests.flower_fixtures:good_app", "--out", "@file"],
]
REFUSAL_PROBE = """
import contextlib, io, json, sys
from stabkit_cli.main import main
results = []
for args in {cases!r}:
    args = [a.replace("@", {root!r} + "/") for a in args]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
            code = 0
        except SystemExit as e:
            code = e.code
    results.append([args, code, err.getvalue(), [m for m in ("torch", "pandas") if m in sys.modules]])
print(json.dumps(results))
"""


def _refused_before_torch(cases: list, root) -> None:
    """Every command line of ``cases`` (``@name``: a file under ``root``), run in one fresh process in turn,
    is refused in one line with exit status 2 before torch or pandas is imported."""
    done = subprocess.run([sys.executable, "-c", REFUSAL_PROBE.format(cases=cases, root=str(root))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for args, code, err, heavy in json.loads(done.stdout):
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, code, err)
        assert not heavy, f"stabkit {' '.join(args)} imported {heavy} before refusing: {lines[0]}"


def test_pair_refuses_bad_options_before_importing_torch(tmp_path):
    """A refusal decided by the options (values, presets, hyperparameters, config files, --out, --resume
    directory, a generated task too large for the machine, --estimate's --data-dir) comes before torch's and
    pandas' imports (2-3 s together on a loaded machine)."""
    (tmp_path / "file").touch()
    (tmp_path / "empty").mkdir()
    _refused_before_torch([["pair", *args, "--quiet"] for args in REFUSALS], tmp_path)


def test_other_commands_refuse_before_importing_torch(tmp_path):
    """``sweep`` (every job's config, the executor and its address), ``atlas`` (--out, --address), ``presets
    --estimate`` (--data-dir), ``sharpness`` and ``landscape`` (their options, the saved run's config.json,
    rounds, pairs and model files) and ``unlearn`` (the run's perturbation, the format) refuse before torch is
    imported: a bad invocation takes well under 1 s."""
    from stabkit import RunConfig, run_pair
    from tests.cli.test_bad_inputs import DAMAGE

    (tmp_path / "file").touch()
    run_pair(RunConfig(rounds=2, pairs=2, hidden=8, constants=False), out=tmp_path / "run")
    for name in ("missing_model", "corrupt_config", "list_config", "empty_round"):
        shutil.copytree(tmp_path / "run", tmp_path / name)
        DAMAGE[name](tmp_path / name)
    _refused_before_torch(ELSEWHERE, tmp_path)


def test_flower_refusals_come_before_torch(tmp_path):
    """A misspelt strategy, an argument out of its range, a robust aggregator with too few clients, a DP wrapper
    around the other API, and a --flwr-app run's options: refused with flwr imported, torch not (the issue's
    4.7 s for a misspelt name)."""
    pytest.importorskip("flwr")
    (tmp_path / "file").touch()
    _refused_before_torch([["pair", *args, "--quiet"] for args in FLOWER], tmp_path)


RUN_PROBE = """
import contextlib, io, sys, tempfile
from stabkit_cli.main import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(["pair", "--task", "quadratic", "--model", "linear", "--pairs", "2", "--rounds", "2", "--quiet",
              "--no-constants", "--out", tempfile.mkdtemp() + "/run"])
    except SystemExit as e:
        assert not e.code, e.code
print(",".join(m for m in ("torch._dynamo", "torch._inductor.config", "torch.fx.experimental.symbolic_shapes")
               if m in sys.modules))
"""


def test_a_cpu_run_imports_no_compiler():
    """A paired run on the CPU loads none of torch's compiler stack (torch._dynamo with inductor's
    configuration and symbolic shapes: ~2 s of start-up): the deterministic-mode switch, the model check on
    the meta device and the FLOP count each used to import it. (The constants, which this run skips, are
    pinned by the next test: they import no compiler either.)"""
    done = subprocess.run([sys.executable, "-c", RUN_PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"stabkit pair imported {done.stdout.strip()}"


def test_the_machine_policy_puts_large_tensors_in_huge_pages():
    """The machine policy applied before torch (as the command does) turns on torch's huge-page allocations for
    large tensors (where the kernel offers transparent huge pages, a 64 MB tensor lands in them); a value the
    user set stands."""
    import os
    from pathlib import Path
    probe = ("from stabkit.engine import machine; machine.apply(); import torch, os; t = torch.ones(16 << 20); "
             "huge = [int(l.split()[1]) for l in open('/proc/self/smaps_rollup') if l.startswith('AnonHugePages')]; "
             "print(os.environ['THP_MEM_ALLOC_ENABLE'], huge[0] if huge else -1)")
    modes = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    mode = modes.read_text() if modes.is_file() else "[never]"  # "[always]": huge pages without asking
    base = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    for env, flag in (({}, "1"), ({"THP_MEM_ALLOC_ENABLE": "0"}, "0")):
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                              env=base | env)
        assert done.returncode == 0, done.stderr
        got, huge_kb = done.stdout.split()
        assert got == flag
        if "[madvise]" in mode or ("[always]" in mode and flag == "1"):
            assert (int(huge_kb) >= 32 << 10) == (flag == "1"), (flag, huge_kb)


FIRST_ROUND_PROBE = """
import sys
from stabkit.engine.paired import PairedEngine
seen = []
step = PairedEngine.step
def first_step(self, *a, **k):
    if not seen:
        seen.append(",".join(m for m in ("pandas", "scipy", "matplotlib", "seaborn", "sklearn", "torch._dynamo")
                             if m in sys.modules) or "none")
    return step(self, *a, **k)
PairedEngine.step = first_step
from stabkit_cli.main import main
main(["pair", "--rounds", "3", "--pairs", "2", "--quiet", "--out", {out!r}])
print("before round 1:", seen[0])
print("dynamo:", "torch._dynamo" in sys.modules, "sympy:", "sympy" in sys.modules)
"""


def test_a_default_pair_imports_no_analysis_library_before_round_1_and_never_dynamo(tmp_path):
    """The default run (digits, MLP, constants estimated) starts its rounds without pandas, scipy, matplotlib,
    seaborn or scikit-learn, and never imports ``torch._dynamo`` or sympy: the constants' Hessian-vector products
    and per-sample gradients go through plain autograd and the engine's batched gradient, not ``torch.func``."""
    done = subprocess.run([sys.executable, "-c", FIRST_ROUND_PROBE.format(out=str(tmp_path / "r"))], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert "before round 1: none" in lines and "dynamo: False sympy: False" in lines, done.stdout
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["constants"] == "estimated"
