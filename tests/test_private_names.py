"""No module reaches into another module's private names.

A leading underscore says "this may change without notice"; a module that imports another's
``_name`` (``from geode.x import _y``) or reads it off an imported module (``x._y`` where ``x``
is a geode module bound by an import) ties itself to that detail, and the split between the two
files stops being an interface. The walk parses every module under ``geode/`` with ``ast`` (lazy
imports inside functions included) and names each site by file and line.

Dunder names (``__version__``, ``__file__``) are public by convention and not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "geode"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_uses(path: Path, known: set[str]) -> list[str]:
    """Every import of, or attribute read of, another geode module's private name in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = _module_name(path)
    bound: dict[str, str] = {}  # local name -> geode module it is bound to
    out: list[str] = []
    rel = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "geode":
                    continue
                if a.asname:
                    bound[a.asname] = a.name
                for part in a.name.split("."):
                    if _private(part):
                        out.append(f"{rel}:{node.lineno} imports private module {a.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] != "geode" or node.module == here:
                continue
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in known:
                    bound[a.asname or a.name] = full
                if _private(a.name):
                    out.append(f"{rel}:{node.lineno} imports {node.module}.{a.name}")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
            and bound[node.value.id] != here
            and _private(node.attr)
        ):
            out.append(f"{rel}:{node.lineno} reads {bound[node.value.id]}.{node.attr}")
    return out


def test_no_module_uses_another_modules_private_names():
    paths = sorted(PKG.rglob("*.py"))
    known = {_module_name(p) for p in paths}
    bad: list[str] = []
    for path in paths:
        bad.extend(private_uses(path, known))
    # the walk covered the package, not an empty or misplaced tree
    assert len(paths) >= 100, f"only {len(paths)} modules examined under {PKG}"
    assert not bad, "private names used across modules:\n" + "\n".join(bad)


def test_the_walk_sees_each_kind_of_site(tmp_path):
    """The detector itself: each kind of reach-in is found, and public or own names are not."""
    pkg = tmp_path / "geode"
    pkg.mkdir()
    (pkg / "a.py").write_text("_x = 1\n")
    (pkg / "b.py").write_text(
        "from geode.a import _x\n"
        "from geode import a\n"
        "import geode.a as aa\n"
        "def f():\n"
        "    from geode.a import _y\n"
        "    return a._z, aa._w, a.public, a.__name__\n"
    )
    (pkg / "c.py").write_text("_own = 1\nimport geode.c as me\nme._own\n")
    known = {"geode", "geode.a", "geode.b", "geode.c"}
    global ROOT
    saved = ROOT
    ROOT = tmp_path
    try:
        found = private_uses(pkg / "b.py", known)
        own = private_uses(pkg / "c.py", known)
    finally:
        ROOT = saved
    text = "\n".join(found)
    assert "geode.a._x" in text and "geode.a._y" in text
    assert "reads geode.a._z" in text and "reads geode.a._w" in text
    assert "public" not in text and "__name__" not in text
    assert len(found) == 4
    assert own == []
