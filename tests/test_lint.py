"""The tree passes `ruff check` with the configuration in pyproject.toml (imports sorted (isort), no unused or
undefined names, pycodestyle errors and warnings), and every function in stabkit/ and cli/ is short and takes
few parameters."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_passes():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "stabkit", "cli", "tests", "benchmarks",
                           "examples", "figures", "docs"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


MAX_LINES = 45  # from the `def` line to the function's last line (decorators not counted)
MAX_PARAMS = 10  # every parameter: self, positional, keyword-only, *args and **kwargs


def function_sizes(source: str) -> list:
    """``(name, line, lines, parameters)`` of every function and method in ``source``, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + \
                (a.kwarg is not None)
            found.append((node.name, node.lineno, node.end_lineno - node.lineno + 1, params))
    return found


def test_function_sizes_are_measured_as_stated():
    source = "class A:\n    def m(self, a, /, b, *c, d, **e):\n        x = 1\n\n        return x\n" \
             "@dec\ndef f():\n    def inner(): pass\n    return inner\n"
    assert function_sizes(source) == [("f", 7, 3, 0), ("m", 2, 4, 6), ("inner", 8, 1, 0)]


def test_functions_are_short_with_few_parameters():
    offenders = [f"{path.relative_to(ROOT)}:{line} {name}: {lines} lines, {params} parameters"
                 for room in ("stabkit", "cli") for path in sorted((ROOT / room).rglob("*.py"))
                 for name, line, lines, params in function_sizes(path.read_text())
                 if lines > MAX_LINES or params > MAX_PARAMS]
    assert not offenders, f"at most {MAX_LINES} lines and {MAX_PARAMS} parameters:\n" + "\n".join(offenders)


def test_tests_drive_runs_through_paired_run_step():
    """A test runs rounds through ``PairedRun.step`` (the round as a run logs it), not the engine's own step,
    so that the engine's internals can change without the tests that pin runs."""
    calls = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "tests").rglob("*.py"))
             if path != Path(__file__).resolve()
             for n, line in enumerate(path.read_text().splitlines(), 1) if ".engine.step(" in line]
    assert calls == [], calls
