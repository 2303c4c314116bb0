"""Product code reads no test-only switch: no ``GEODE_TEST...`` name appears anywhere under
``geode/`` (an environment variable a test sets to steer a real process). A test that must
steer a real ``geode`` process starts it through a runner of its own that sets a module-level
seam (``tests/apply_seam.py`` sets ``geode.queue.apply.before_file``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "geode"


def test_no_module_names_a_test_only_switch():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "GEODE_TEST" in node.value:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, f"a test-only switch in product code: {found}"
