"""A crystal whose frontmatter only the full YAML parser reads (an anchor, an alias, a tag).

The hook reads frontmatter with a standard-library subset and declines what it cannot be sure
of. The binding index is built off the hook with the full parser, so such a crystal is
delivered, until the note changes: then the hook re-reads it, declines it and drops it, and
nothing said so (doctor's index check counted files, not what the hook could read). Now the
index remembers what the hook declined, the next refresh off the hook reads it in full, and
doctor's ``hook-reader`` check fails naming the crystal and its construct.

Real parts: the installed hook command as a subprocess, ``geode reindex`` and ``geode doctor``
through the CLI entry point.
"""

from __future__ import annotations

import json

from geode.cli.main import main
from tests.helpers import Geode, crystal_text

PIPE = "After `a | b`, $? is b's status: the build may have failed."


def _doctor(g: Geode, monkeypatch, capsys) -> dict[str, dict]:
    for k, v in g.env().items():
        if k.startswith("GEODE_"):
            monkeypatch.setenv(k, v)
    capsys.readouterr()
    main(["doctor", "--json", "--skip-model"])
    out = json.loads(capsys.readouterr().out)
    checks = out["checks"] if isinstance(out, dict) else out
    return {c["name"]: c for c in checks}


def _reindex(g: Geode, monkeypatch, capsys) -> None:
    for k, v in g.env().items():
        if k.startswith("GEODE_"):
            monkeypatch.setenv(k, v)
    assert main(["reindex"]) == 0  # the default store, the index the hook reads
    capsys.readouterr()


def _delivered(g: Geode, session: str) -> bool:
    res = g.bash("make | tail -5", session=session)
    assert res.rc == 0 and res.errors == "", res
    return bool(res.stdout) and PIPE in res.context


def test_a_crystal_only_the_full_parser_reads_is_named_by_doctor_and_restored_off_the_hook(
    tmp_path, monkeypatch, capsys
):
    g = Geode(tmp_path)
    g.init_db()
    anchored = crystal_text(PIPE, name="pipe", match='"| tail"', extra="kind: &k feedback\nagain: *k")
    g.write("pipe.md", anchored)
    g.crystal("rm.md", "Quote the variable in rm -rf.", name="rm", match='"rm -rf"')
    _reindex(g, monkeypatch, capsys)

    checks = _doctor(g, monkeypatch, capsys)
    hr = checks["hook-reader"]
    assert not hr["ok"], hr
    assert hr["examined"] == {"crystals": 2, "outside_hook_subset": 1}, hr
    assert "pipe.md:3" in hr["message"] and "anchor" in hr["message"], hr["message"]
    assert _delivered(g, "s1"), "built off the hook by the full parser, the crystal is delivered"

    # the note changes: the hook re-reads it with its own reader, declines it, drops it
    g.write("pipe.md", anchored + "\nA line added later.\n")
    assert not _delivered(g, "s2")

    # any refresh off the hook (doctor here) reads what the hook declined, in full
    checks = _doctor(g, monkeypatch, capsys)
    assert checks["index"]["examined"]["crystals"] == 2, checks["index"]
    assert not checks["hook-reader"]["ok"]
    assert _delivered(g, "s3")

    # rewritten inside the subset: the hook reads it after a change, and doctor is green
    g.write("pipe.md", crystal_text(PIPE, name="pipe", match='"| tail"', extra="kind: feedback\nagain: feedback"))
    assert _delivered(g, "s4")
    checks = _doctor(g, monkeypatch, capsys)
    assert checks["hook-reader"]["ok"], checks["hook-reader"]
    assert checks["hook-reader"]["examined"] == {"crystals": 2, "outside_hook_subset": 0}


def test_a_note_that_is_not_a_crystal_may_use_any_yaml(tmp_path, monkeypatch, capsys):
    """Only crystals are the hook's business: an Obsidian note with an anchor is recall's, read off the hook."""
    g = Geode(tmp_path)
    g.init_db()
    g.write("notes/vault.md", "---\ntitle: &t Vault\naliases: [*t]\n---\n# Vault\n\nPlain note.\n")
    g.crystal("rm.md", "Quote the variable in rm -rf.", name="rm", match='"rm -rf"')
    _reindex(g, monkeypatch, capsys)
    hr = _doctor(g, monkeypatch, capsys)["hook-reader"]
    assert hr["ok"] and hr["examined"] == {"crystals": 1, "outside_hook_subset": 0}, hr
