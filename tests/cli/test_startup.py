"""Start-up: the listing commands import none of the heavy libraries (each costs 0.2-2 s at start-up)."""
import json
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
]
REFUSAL_PROBE = """
import contextlib, io, json, os, sys, tempfile
from stabkit_cli.main import main
root = tempfile.mkdtemp()
open(os.path.join(root, "file"), "w").close()
os.mkdir(os.path.join(root, "empty"))
results = []
for args in {cases!r}:
    args = [a.replace("@", root + "/") for a in args]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(["pair", *args, "--quiet"])
            code = 0
        except SystemExit as e:
            code = e.code
    results.append([args, code, err.getvalue(), [m for m in ("torch", "pandas") if m in sys.modules]])
print(json.dumps(results))
"""


def test_pair_refuses_bad_options_before_importing_torch():
    """A refusal decided by the options (values, presets, hyperparameters, config files, --out, --resume
    directory) comes before torch's and pandas' imports (2-3 s together on a loaded machine)."""
    done = subprocess.run([sys.executable, "-c", REFUSAL_PROBE.format(cases=REFUSALS)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for args, code, err, heavy in json.loads(done.stdout):
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, code, err)
        assert not heavy, f"stabkit pair {' '.join(args)} imported {heavy} before refusing: {lines[0]}"


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
    the meta device and the FLOP count each used to import it. (The constants' Hessian-vector products go
    through torch.func transforms, which do; this run skips them.)"""
    done = subprocess.run([sys.executable, "-c", RUN_PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"stabkit pair imported {done.stdout.strip()}"


def test_importing_stabkit_first_puts_large_tensors_in_huge_pages():
    """``import stabkit`` before torch turns on torch's huge-page allocations for large tensors (where the
    kernel offers transparent huge pages, a 64 MB tensor lands in them); a value the user set stands."""
    import os
    from pathlib import Path
    probe = ("import stabkit, torch, os; t = torch.ones(16 << 20); "
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
