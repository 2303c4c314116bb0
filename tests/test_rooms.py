"""The house: one import name, rooms whose imports point one way, no cycles (DESIGN.md).

Every folder under ``geode/`` that holds a module is a room, declared in :data:`ALLOWED` with
the rooms it may import; a new folder fails the test until it is declared. Imports point one way:

- ``kernel`` (settings, errors, dates, the note and frontmatter readers, the store walk) at the
  bottom, then ``delivery`` (the hook and what it loads: kernel only), ``records`` (the records
  models and migrations; they drain the delivery ledger's spool, so they sit above it), then
  ``evidence`` and ``recall``; ``queue`` and ``links`` beside them;
- ``agents`` (the contract) above those, the four agents above ``agents`` and not each other,
  ``scheduler`` above the agents; ``install`` above the kernel and delivery;
- ``services`` (what the surfaces share) above all of those; the three surfaces ``cli``, ``web``
  and ``mcp`` above ``services`` and none of them importing another; ``program`` (the one
  ``geode`` program, put together from the three surfaces) on top.

An import is any ``import`` statement at any depth (lazy imports in functions included) and any
string-loaded module: an ``importlib.import_module`` or ``__import__`` call on a literal
``"geode...."`` name, or on a module-level tuple or list of such names the module iterates over.
Any other dynamic load is refused, except the plugin boundary named in :data:`DYNAMIC_LOADS`.
Inside the package no module imports, at any depth, a module that imports it back: a cycle is a
design smell whether or not Python happens to resolve it at run time.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "geode"
AGENTS = {"librarian", "cleaner", "gardener", "corrector"}
SURFACES = {"cli", "web", "mcp"}

_RECORDS_UP = {"kernel", "delivery", "records"}
_BELOW_AGENTS = _RECORDS_UP | {"evidence", "recall", "queue", "links"}
_BELOW_SERVICES = _BELOW_AGENTS | {"agents", *AGENTS, "scheduler", "install"}
ALLOWED: dict[str, set[str]] = {
    "kernel": set(),
    # the hook's room: the standard library and the kernel only (tests/test_hook_imports.py)
    "delivery": {"kernel"},
    # the records models drain the spool the hook's ledger writer (delivery) fills
    "records": {"kernel", "delivery"},
    "evidence": _RECORDS_UP,
    "recall": _RECORDS_UP,
    "queue": _RECORDS_UP,
    "links": _RECORDS_UP | {"queue"},
    "agents": _BELOW_AGENTS,
    **{a: _BELOW_AGENTS | {"agents"} for a in AGENTS},
    "scheduler": _BELOW_AGENTS | {"agents", *AGENTS},
    "install": {"kernel", "delivery"},
    "services": _BELOW_SERVICES,
    # the surfaces: thin adapters over the services, none importing another
    **{s: _BELOW_SERVICES | {"services"} for s in SURFACES},
    "program": _BELOW_SERVICES | {"services", *SURFACES},
}
#: The modules directly in ``geode/``: the package root (imports nothing) and ``python -m geode``.
TOP_LEVEL = {"geode": set(), "geode.__main__": {"program"}}
#: The one dynamic load allowed: (file, why). The modules it loads are named by configuration,
#: not by the code, so no room table can list them.
DYNAMIC_LOADS = {
    "geode/agents/upkeep.py": "the plugin boundary: the agent modules named in [upkeep] agents of geode.toml",
}
#: Kernel modules backed by a library, and the libraries: readers off the hook's path (the hook
#: reads frontmatter with the standard-library subset reader, and notes without markdown-it).
LIBRARY_READERS = {
    "geode.kernel.frontmatter_full": {"yaml"},
    "geode.kernel.mdread": {"markdown_it", "mdit_py_plugins"},
}
#: Standard-library modules of other Python versions the kernel tries first (``_sha2`` is 3.12's
#: name of the builtin ``_sha256``), absent from this interpreter's ``sys.stdlib_module_names``.
OTHER_PYTHONS_STDLIB = {"_sha2"}
OLD_TOP_LEVEL = {"delivery", "agents", "librarian", "cleaner", "gardener", "corrector", "scheduler"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_import_call(node: ast.Call) -> bool:
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "import_module") or (
        isinstance(f, ast.Name) and f.id in ("import_module", "__import__")
    )


def _geode_strings(node: ast.AST) -> list[str] | None:
    """The names of a module-level tuple or list made only of ``"geode...."`` strings, else None."""
    if not isinstance(node, (ast.Tuple, ast.List)) or not node.elts:
        return None
    names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if len(names) != len(node.elts) or not all(n == "geode" or n.startswith("geode.") for n in names):
        return None
    return names


def string_loads(tree: ast.Module) -> tuple[set[str], int]:
    """(the ``geode`` modules this file loads by name, its dynamic loads of names the code does
    not spell out)."""
    listed: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = _geode_strings(node.value)
            for t in targets:
                if names is not None and isinstance(t, ast.Name):
                    listed[t.id] = names
    iterated = {
        n.iter.id
        for n in ast.walk(tree)
        if isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.iter, ast.Name)
    }
    loaded: set[str] = set()
    dynamic = 0
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_import_call(node)) or not node.args:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if arg.value.startswith("geode"):
                loaded.add(arg.value)
            continue
        from_lists = [m for name, mods in listed.items() if name in iterated for m in mods]
        if from_lists:
            loaded.update(from_lists)
        else:
            dynamic += 1
    return loaded, dynamic


def imports_of(path: Path) -> set[str]:
    """Every absolute module name this file imports, at any depth (``from a import b`` yields
    ``a.b`` when that is a module of ours, else ``a``), string-loaded modules included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import (use the absolute geode.* name)"
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    out |= string_loads(tree)[0]
    return out


def import_time_imports(path: Path) -> set[str]:
    """The modules this file imports when it is imported: module-level statements (inside ``if``
    and ``try`` too), not function bodies, not ``if TYPE_CHECKING:``."""
    out: set[str] = set()

    def visit(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                out.add(node.module)
                out.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)).body)
    return out


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def room_of(mod: str) -> str | None:
    """The room a ``geode.*`` module name belongs to (its first folder), or None."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "geode" and parts[1] in ALLOWED else None


def test_every_folder_that_holds_a_module_is_a_declared_room():
    folders = {p.relative_to(PKG).parts[0] for p in PKG.rglob("*.py") if len(p.relative_to(PKG).parts) > 1}
    assert len(folders) >= 19, folders
    assert not folders - set(ALLOWED), f"rooms not declared in ALLOWED: {sorted(folders - set(ALLOWED))}"
    assert not set(ALLOWED) - folders, f"declared rooms without a module: {sorted(set(ALLOWED) - folders)}"
    top = {module_name(p) for p in PKG.glob("*.py")}
    assert top == set(TOP_LEVEL), f"modules directly in geode/: {sorted(top)}"


def test_imports_point_one_way():
    mods = modules()
    bad = []
    checked = edges = 0
    for mod, path in mods.items():
        room = room_of(mod)
        allowed = ALLOWED[room] if room else TOP_LEVEL.get(mod)
        if allowed is None:
            bad.append(f"{path.relative_to(ROOT)} is in no declared room")
            continue
        checked += 1
        for imp in imports_of(path):
            top = imp.split(".")[0]
            if top in OLD_TOP_LEVEL:
                bad.append(f"{path.relative_to(ROOT)} imports the old top-level name {imp}")
            other = room_of(imp)
            if other and other != room:
                edges += 1
                if other not in allowed:
                    bad.append(f"{path.relative_to(ROOT)} imports {imp} (room {other})")
    assert checked >= 150, f"examined only {checked} modules"
    assert edges >= 500, f"examined only {edges} imports across rooms"
    assert not bad, "\n".join(sorted(bad))


def test_no_surface_imports_another():
    """The command line, the page and the MCP server import none of one another (the table says
    so; this says it in so many words, for the day someone widens the table)."""
    for s in SURFACES:
        assert not ALLOWED[s] & (SURFACES | {"program"}), s
    assert not any("program" in v for r, v in ALLOWED.items() if r != "program")


def test_string_loaded_modules_are_imports_and_only_the_plugin_boundary_loads_by_configuration():
    sample = ast.parse(
        'import importlib\nMODS = ("geode.web.command", "geode.mcp.command")\n'
        "def f():\n    for m in MODS:\n        importlib.import_module(m)\n"
        '    __import__("geode.cli.main")\n'
    )
    assert string_loads(sample) == ({"geode.web.command", "geode.mcp.command", "geode.cli.main"}, 0)
    dynamic = {}
    for path in modules().values():
        n = string_loads(ast.parse(path.read_text(encoding="utf-8")))[1]
        if n:
            dynamic[str(path.relative_to(ROOT))] = n
    assert set(dynamic) == set(DYNAMIC_LOADS), f"dynamic loads outside the plugin boundary: {dynamic}"


def test_the_kernel_imports_only_the_standard_library_and_itself_at_import_time():
    """Every room may use the kernel, the hook included: at import time a kernel module loads
    the standard library and other kernel modules, nothing else. The library-backed readers of
    :data:`LIBRARY_READERS` are the exception, and the hook's modules do not load them when they
    are imported (tests/test_hook_imports.py checks the hook's real process)."""
    stdlib = set(sys.stdlib_module_names) | OTHER_PYTHONS_STDLIB
    mods = {m: p for m, p in modules().items() if room_of(m) == "kernel"}
    assert len(mods) >= 15, sorted(mods)
    bad = []
    for mod, path in mods.items():
        libs = LIBRARY_READERS.get(mod, set())
        for imp in import_time_imports(path):
            top = imp.split(".")[0]
            if top == "geode":
                if room_of(imp) != "kernel":
                    bad.append(f"{mod} imports {imp}")
            elif top not in stdlib and top != "__future__" and top not in libs:
                bad.append(f"{mod} imports {imp} when it is imported")
        for imp in imports_of(path):  # lazily too: every library the kernel uses is named
            top = imp.split(".")[0]
            if top not in stdlib | {"geode", "__future__"} and top not in libs:
                bad.append(f"{mod} imports {imp} (not a named library-backed reader)")
    assert not bad, bad
    assert set(LIBRARY_READERS) <= set(mods)

    # what loading the hook's modules loads, following import-time imports through the package
    all_mods = modules()
    seen: set[str] = set()
    todo = ["geode.delivery.hookmain", "geode.delivery.hook"]
    while todo:
        m = todo.pop()
        if m in seen or m not in all_mods:
            continue
        seen.add(m)
        todo.extend(i for i in import_time_imports(all_mods[m]) if i in all_mods)
    assert "geode.delivery.hook" in seen and len(seen) >= 5, sorted(seen)
    eager = {
        m for m, libs in LIBRARY_READERS.items() if {i.split(".")[0] for i in import_time_imports(all_mods[m])} & libs
    }
    assert eager, "no reader imports its library at import time: the check below checks nothing"
    assert not seen & eager, f"the hook's modules load a library-backed reader: {sorted(seen & eager)}"


# Private names across modules, in every room: tests/test_private_names.py.


def test_no_import_cycles_inside_the_package():
    mods = modules()
    graph = {m: {i for i in imports_of(p) if i in mods and i != m} for m, p in mods.items()}
    # A package's __init__ re-exporting a submodule is not a cycle of design.
    for m in graph:
        graph[m] = {i for i in graph[m] if not m.startswith(i + ".")}
    assert sum(len(v) for v in graph.values()) >= 400, "examined too few import edges"
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
