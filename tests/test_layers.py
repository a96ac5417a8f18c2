"""The house's layering, read from the code: every ``import`` of stabkit (and of the CLI) runs downward and
no module imports itself back through others.

The rooms are ordered bottom to top (``LAYERS``); a module may import its own room and the rooms below it,
never one above. Imports are read with ``ast`` from every line of every module, those inside functions
included (an import deferred into a function still ties the modules together), except imports under
``if TYPE_CHECKING:`` (annotations only). A test fails on an upward import with the line that makes it and
on a cycle with the modules in it.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Bottom to top: a room imports only rooms listed before it (and itself).
LAYERS = [
    ("stabkit", "stabkit.lazy", "stabkit.errors", "stabkit.extras", "stabkit.keyvalue", "stabkit.trajectories"),
    # the root: version, lazy exports, errors, extras, the KEY=VALUE reader, the trajectories' names
    ("stabkit.plugins",),
    ("stabkit.store",),  # file formats of a run directory
    ("stabkit.plotting",),  # the Agg backend, style, colours and saving of every figure (with its sidecar)
    ("stabkit.algorithms",),
    ("stabkit.privacy",),  # DP accounting, the audit's statistics, a DP run's privacy.json and report
    ("stabkit.config",),  # RunConfig, TaskOptions, presets
    ("stabkit.tasks",),
    ("stabkit.models",),
    ("stabkit.engine",),
    ("stabkit.analysis",),
    ("stabkit.flatness",),
    ("stabkit.run",),
    ("stabkit.sweep", "stabkit.testing", "stabkit.fixtures", "stabkit.unlearn"),
    ("stabkit.atlas",),  # suites of sweeps and their page
    ("stabkit_cli",),
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[0] == "cli":
        parts[0] = "stabkit_cli"
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict:
    files = sorted((ROOT / "stabkit").rglob("*.py")) + sorted((ROOT / "cli").glob("*.py"))
    return {_module_name(p): p for p in files}


def _type_checking_lines(tree) -> set:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, child.end_lineno + 1))
    return lines


def _imports(name: str, path: Path, known: dict) -> list:
    """``[(imported module, line)]`` of stabkit modules that module ``name`` imports."""
    tree = ast.parse(path.read_text())
    skip = _type_checking_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            # ``from package import module`` imports the module; ``from module import name`` the module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        out += [(t, node.lineno) for t in targets if t in known]
    return out


def _layer(module: str) -> int:
    best, level = -1, None
    for i, rooms in enumerate(LAYERS):
        for room in rooms:
            inside = module.startswith(room + ".") and room != "stabkit"  # the root holds no other module
            if (module == room or inside) and len(room) > best:
                best, level = len(room), i
    assert level is not None, f"{module} is in no room of LAYERS: add its room"
    return level


def _graph() -> dict:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def test_every_module_has_a_room_and_no_import_runs_upward():
    upward = [f"{a} (line {line}) imports {b}" for a, targets in _graph().items() for b, line in targets
              if _layer(b) > _layer(a)]
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_no_import_cycle():
    graph = {a: sorted({b for b, _ in targets if b != a}) for a, targets in _graph().items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_check_sees_upward_and_circular_imports(tmp_path):
    """The reader itself: a deferred import inside a function and a relative import are both found."""
    (tmp_path / "a.py").write_text("def f():\n    from stabkit.run import experiment\n")
    (tmp_path / "b.py").write_text("from . import a\n")
    known = {"stabkit.run.experiment": None, "stabkit.x.a": None}
    assert _imports("stabkit.x.a", tmp_path / "a.py", known) == [("stabkit.run.experiment", 2)]
    assert _imports("stabkit.x.b", tmp_path / "b.py", known) == [("stabkit.x.a", 1)]
    assert _layer("stabkit.store.runstore") < _layer("stabkit.engine.paired") < _layer("stabkit.run.experiment")
