"""The Gardener's rules that draft a new note run through one tail (``GardenerRun.propose_new_note``
in ``geode/gardener/keys.py``): the finding reported, a held key not filed again, an existing file a
``Skipped`` row, the draft citing its rows. The stub and capture rules each had their own copy of
it; this keeps a third from appearing. ``team_drafts`` files from outside a run (no
``GardenerRun``: the Gardener calls it before it reads the ledger) and keeps its own."""

from __future__ import annotations

import ast
from pathlib import Path

GARDENER = Path(__file__).resolve().parent.parent / "geode" / "gardener"
#: the modules that may build a new note's change themselves, and why
OWN_TAIL = {
    "keys.py": "the one tail",
    "team_drafts.py": "files outside a GardenerRun, before the ledger is read",
}


def _calls(tree: ast.AST, name: str) -> list[int]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if called == name:
                out.append(node.lineno)
    return out


def test_only_the_shared_tail_builds_a_new_note_draft():
    seen = {}
    for path in sorted(GARDENER.glob("*.py")):
        lines = _calls(ast.parse(path.read_text(encoding="utf-8")), "new_note_change")
        if lines:
            seen[path.name] = lines
    extra = {name: lines for name, lines in seen.items() if name not in OWN_TAIL}
    assert not extra, f"new_note_change called outside GardenerRun.propose_new_note: {extra}"
    assert "keys.py" in seen


def test_the_stub_and_capture_rules_file_through_it():
    for name in ("stubs.py", "capture.py"):
        tree = ast.parse((GARDENER / name).read_text(encoding="utf-8"))
        assert _calls(tree, "propose_new_note"), name
