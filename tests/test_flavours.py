"""The Librarian on one small store per flavour (tests/fixtures/flavours/<name>), each written in
its tool's own documented syntax with a hand-counted EXPECTED.json: the findings equal the hand
count (kind, note, line, target), no false alarm, the links that resolve are counted, the
detected flavour is stated in the report, and nothing is suggested or proposed (nothing moved).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from geode.agents.upkeep import run_agent
from tests.stores import GeodeEnv

FLAVOURS = Path(__file__).resolve().parent / "fixtures" / "flavours"
NAMES = sorted(p.name for p in FLAVOURS.iterdir() if p.is_dir())


def flavour_store(name: str, tmp_path: Path, toml: str = ""):
    """Copy fixture ``name``; the store is ``docs/`` under an mkdocs project, ``.cursor/rules``
    inside a workspace (given a ``.git`` so the workspace root is known), else the folder."""
    dest = tmp_path / "stores" / name
    shutil.copytree(FLAVOURS / name, dest, ignore=shutil.ignore_patterns("EXPECTED*.json"))
    root = dest
    if (dest / "docs").is_dir():
        root = dest / "docs"
    if (dest / ".cursor" / "rules").is_dir():
        root = dest / ".cursor" / "rules"
        (dest / ".git").mkdir()
    env = GeodeEnv(tmp_path, root=root)
    if toml:
        env.toml(toml)
    return env


def test_every_flavour_has_a_fixture():
    from geode.links.flavour import FLAVOURS as KNOWN

    have = {json.loads((FLAVOURS / n / "EXPECTED.json").read_text(encoding="utf-8"))["flavour"] for n in NAMES}
    assert have == set(KNOWN)


@pytest.mark.parametrize("name", NAMES)
def test_findings_equal_the_hand_count(name, tmp_path):
    exp = json.loads((FLAVOURS / name / "EXPECTED.json").read_text(encoding="utf-8"))
    settings, engine, root = flavour_store(name, tmp_path)
    report = run_agent(settings, engine, "r", "librarian")
    assert report.status == "ok", report.message
    assert report.examined["notes"] == exp["notes"]
    assert f": {exp['flavour']} (" in report.message
    got = sorted([f.kind, f.path, f.line, f.target] for f in report.findings)
    assert got == sorted(exp["findings"])
    assert report.examined["resolved"] == exp["resolved"]
    assert report.examined["links"] > len(exp["findings"])
    assert not [f for f in report.findings if f.suggestion]
    assert report.proposals == []
    assert len(report.skipped) == exp.get("skipped", 0), report.skipped


def test_configured_flavour_overrides_detection(tmp_path):
    """The mkdocs store read as plain: GitHub-style slugs, so #faq-1 resolves and #faq_1 does not."""
    settings, engine, root = flavour_store("mkdocs", tmp_path, '[upkeep]\nflavour = "plain"\n')
    report = run_agent(settings, engine, "r", "librarian")
    assert "plain (configured)" in report.message
    anchors = {f.target for f in report.findings if f.kind == "broken-anchor" and f.path == "about.md"}
    assert "#faq_1" in anchors and "#faq-1" not in anchors


def test_a_similar_name_is_never_a_rename(tmp_path):
    """The skills store: `shared/ooxml.md` is missing and docx/ooxml.md exists; nothing says it
    moved, so there is no suggestion and no edit (a mention is never rewritten anyway)."""
    settings, engine, root = flavour_store("skills", tmp_path)
    (root / "pdf" / "SKILL.md").write_text(
        (root / "pdf" / "SKILL.md").read_text(encoding="utf-8") + "Old guide: [concepts](tool-use-concepts.md).\n",
        encoding="utf-8",
    )
    report = run_agent(settings, engine, "r", "librarian")
    broken = [f for f in report.findings if f.target == "tool-use-concepts.md"]
    assert [(f.kind, f.suggestion) for f in broken] == [("broken-link", "")]
    assert report.proposals == []


def test_git_rename_is_evidence(tmp_path):
    """Where the store is a git repository, a rename recorded by git is the evidence."""
    import subprocess

    settings, engine, root = flavour_store("plain", tmp_path)
    run = lambda *a: subprocess.run(["git", *a], cwd=root, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    run("mv", "my note.md", "renamed note.md")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "move")
    report = run_agent(settings, engine, "r", "librarian")
    moved = [f for f in report.findings if f.target.startswith("<my note.md>") or f.target == "my note.md"]
    assert moved and all(f.suggestion == "renamed note.md" for f in moved)
    assert report.proposals


def test_an_alias_never_steers_a_path_rewrite(tmp_path):
    """Issue 15 point 6: a note declaring ``aliases: [old-name]`` is not evidence that
    ``../../old-name.md`` moved there; a wikilink ``[[old-name]]`` may follow the alias."""
    settings, engine, root = flavour_store("plain", tmp_path)
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "deep.md").write_text(
        "# Deep\n\nSee [old](../../old-name.md) and [[old-name]]. Up: [notes](../../README.md)\n", encoding="utf-8"
    )
    (root / "target.md").write_text("---\naliases: [old-name]\n---\n# Target\n\n[[a/b/deep]]\n", encoding="utf-8")
    report = run_agent(settings, engine, "r", "librarian")
    got = sorted((f.target, f.suggestion) for f in report.findings if f.path == "a/b/deep.md")
    assert got == [("../../old-name.md", ""), ("old-name", "target.md")]
    (prop,) = [p for p in report.proposals if p["paths"] == ["a/b/deep.md"]]
    from geode.queue import review as queue_review

    plus = [ln for ln in queue_review.diff(engine, prop["id"]).splitlines() if ln.startswith("+See")]
    assert plus == ["+See [old](../../old-name.md) and [[target|old-name]]. Up: [notes](../../README.md)"]


def test_a_dendron_vault_without_its_workspace_file_is_still_read_as_dendron(tmp_path):
    """Copied out of its workspace (no dendron.yml), the vault's ``dendron://`` links and note
    references still resolve: detected from Dendron's own frontmatter and dotted names."""
    exp = json.loads((FLAVOURS / "dendron" / "EXPECTED.json").read_text(encoding="utf-8"))
    settings, engine, root = flavour_store("dendron", tmp_path)
    (root / "dendron.yml").unlink()
    report = run_agent(settings, engine, "r", "librarian")
    assert report.status == "ok", report.message
    assert ": dendron (no dendron.yml, but " in report.message, report.message
    assert sorted([f.kind, f.path, f.line, f.target] for f in report.findings) == sorted(exp["findings"])
    assert report.examined["resolved"] == exp["resolved"]


def test_a_store_with_a_few_dotted_names_and_titles_stays_plain(tmp_path):
    from geode.kernel.note import parse_note
    from geode.links.flavour import detect

    texts = {
        "v1.2-release.md": "---\ntitle: Release\n---\n# R\n",
        "notes.md": "---\nid: 1\ntitle: Notes\n---\n# N\n",
        "setup.md": "---\ntitle: Setup\n---\n# S\n",
    }
    notes = [parse_note(t, p) for p, t in texts.items()]
    assert detect(str(tmp_path), notes, set(texts)).name == "plain"


@pytest.mark.parametrize("name", NAMES)
def test_the_corrector_invents_no_fix_on_any_flavour(name, tmp_path):
    """Every broken link in the fixtures is broken for real (nothing was renamed or moved), so
    the Corrector reads every finding the Librarian stored and proposes nothing: an edit here
    would be a guessed target (the skills store once got 41 such rewrites)."""
    exp = json.loads((FLAVOURS / name / "EXPECTED.json").read_text(encoding="utf-8"))
    settings, engine, root = flavour_store(name, tmp_path)
    lib = run_agent(settings, engine, "r", "librarian")
    assert len(lib.findings) == len(exp["findings"]) > 0
    rep = run_agent(settings, engine, "r", "corrector")
    assert rep.status == "ok", rep.message
    assert rep.examined["notes"] == exp["notes"]
    assert rep.examined["findings_read"] == len(exp["findings"]), rep.examined
    assert rep.proposals == [], [p["title"] for p in rep.proposals]
