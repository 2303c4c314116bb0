"""Imports point one way: delivery <- agents <- the four agents <- scheduler (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ["delivery", "agents", "librarian", "cleaner", "gardener", "corrector", "scheduler"]
AGENTS = {"librarian", "cleaner", "gardener", "corrector"}
ALLOWED = {
    "delivery": set(),
    "agents": {"delivery"},
    **{a: {"delivery", "agents"} for a in AGENTS},
    "scheduler": {"delivery", "agents", *AGENTS},
}


def imported_rooms(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out & set(ROOMS) | (out & {"geode"})


def test_imports_point_one_way():
    checked = 0
    bad = []
    for room in ROOMS:
        for path in (ROOT / room).rglob("*.py"):
            checked += 1
            for other in imported_rooms(path) - {room}:
                if other not in ALLOWED[room]:
                    bad.append(f"{path.relative_to(ROOT)} imports {other}")
    assert checked >= 20, f"examined only {checked} modules"
    assert not bad, bad
