"""The house: one import name, rooms whose imports point one way, no cycles (DESIGN.md).

Imports point one way: delivery <- recall <- agents <- the four agents <- scheduler, with the
command line (``geode.cli``) on top. No agent imports another agent. Inside the package no module
imports, at any depth (lazy imports in functions included), a module that imports it back: a
cycle is a design smell whether or not Python happens to resolve it at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "geode"
AGENTS = {"librarian", "cleaner", "gardener", "corrector"}
ROOMS = ["delivery", "recall", "agents", *sorted(AGENTS), "scheduler", "cli", "web", "mcp"]
ALLOWED = {
    "delivery": set(),
    "recall": {"delivery"},
    "agents": {"delivery", "recall"},
    **{a: {"delivery", "recall", "agents"} for a in AGENTS},
    "scheduler": {"delivery", "recall", "agents", *AGENTS},
    "cli": {"delivery", "recall", "agents", *AGENTS, "scheduler"},
    # the page, beside the command line: it reads the rooms' APIs and reuses the CLI's report
    # helpers (doctor checks, search filters); the CLI reaches it only through EXTENSIONS
    "web": {"delivery", "recall", "agents", *AGENTS, "scheduler", "cli"},
    # the recall tools over MCP, beside the page: the recall API, the CLI's filter parsing, and
    # the page's Host and token guard for its loopback HTTP; the CLI reaches it only through EXTENSIONS
    "mcp": {"delivery", "recall", "agents", *AGENTS, "scheduler", "cli", "web"},
}
OLD_TOP_LEVEL = {"delivery", "agents", "librarian", "cleaner", "gardener", "corrector", "scheduler"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every absolute module name this file imports, at any depth (``from a import b`` yields
    ``a.b`` when that is a module of ours, else ``a``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import (use the absolute geode.* name)"
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def room_of(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "geode" and parts[1] in ALLOWED else None


def test_imports_point_one_way():
    mods = modules()
    bad = []
    checked = 0
    for mod, path in mods.items():
        room = room_of(mod)
        if room is None:
            continue
        checked += 1
        for imp in imports_of(path):
            top = imp.split(".")[0]
            if top in OLD_TOP_LEVEL:
                bad.append(f"{path.relative_to(ROOT)} imports the old top-level name {imp}")
            other = room_of(imp)
            if other and other != room and other not in ALLOWED[room]:
                bad.append(f"{path.relative_to(ROOT)} imports {imp} (room {other})")
    assert checked >= 60, f"examined only {checked} modules"
    assert set(ROOMS) <= {room_of(m) for m in mods}, "a room has no module"
    assert not bad, bad


def test_no_import_cycles_inside_the_package():
    mods = modules()
    graph = {m: {i for i in imports_of(p) if i in mods and i != m} for m, p in mods.items()}
    # A package's __init__ re-exporting a submodule is not a cycle of design.
    for m in graph:
        graph[m] = {i for i in graph[m] if not m.startswith(i + ".")}
    assert sum(len(v) for v in graph.values()) >= 100, "examined too few import edges"
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n) :] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_the_package_root_imports_nothing():
    """``geode/__init__.py`` runs before the hook's code; it must stay empty of imports."""
    assert not imports_of(PKG / "__init__.py")
