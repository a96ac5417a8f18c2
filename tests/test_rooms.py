"""The rooms' docstrings say what is true: each names every module of its room, and the engine's claim about
the file system holds in its code."""
import ast
import re
from pathlib import Path

import pytest

STABKIT = Path(__file__).resolve().parents[1] / "stabkit"
ROOMS = ["analysis", "atlas", "config", "engine", "flatness", "models", "run", "store", "sweep", "testing", "unlearn"]
FILE_ACCESS = re.compile(r"\bopen\(|\.read_text\(|\.write_text\(|\.read_bytes\(|\.write_bytes\(|torch\.save\(|"
                         r"torch\.load\(|np\.load\(|np\.save\(|\.mkdir\(|subprocess\.")


def room_doc(room: str) -> str:
    return ast.get_docstring(ast.parse((STABKIT / room / "__init__.py").read_text()))


@pytest.mark.parametrize("room", ROOMS)
def test_room_docstring_names_every_module(room):
    parts = [p.stem for p in (STABKIT / room).glob("*.py") if p.stem != "__init__"]
    parts += [p.name for p in (STABKIT / room).iterdir() if p.is_dir() and p.name != "__pycache__"]
    doc = room_doc(room)
    assert [p for p in sorted(parts) if not re.search(rf"\b{p}\b", doc)] == []


def test_engine_touches_the_file_system_where_its_docstring_says():
    """``memory``, ``threads`` and ``kernels`` read /proc; nothing else touches the file system."""
    touching = sorted(p.stem for p in (STABKIT / "engine").glob("*.py") if FILE_ACCESS.search(p.read_text()))
    assert touching == ["kernels", "memory", "threads"]
    assert "``memory``, ``threads`` and ``kernels`` read ``/proc``" in room_doc("engine")
