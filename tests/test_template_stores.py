"""Upkeep that never harms a template-heavy store (issue 21, parts A to C).

- The duplicate rule on three stores written from one template each (``tests.template_stores``):
  it finds the one pair written twice and none of the template siblings (alert runbooks of one
  service, ``encode``/``decode`` reference pages, per-library rules).
- Three nights of a trusting person: all agents run in this process, every proposal is approved,
  three nights in a row; no live note is retired or moved, nothing new lands in the tree the
  store's tool publishes, the true duplicates are shown in a proposal naming both, and the third
  night files nothing.
- Geode's own edits are never evidence: a ``status: superseded`` or a ``supersedes`` an applied
  proposal wrote does not choose a note to archive, and a folder's cap counts the person's notes,
  not geode's files; the same facts written by a person do.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from geode.agents.upkeep import run_agent, run_upkeep
from geode.kernel.crystal import RETIRED_STATUSES
from geode.kernel.store import load_store
from geode.queue import apply, proposals
from geode.queue.proposals import FileChange, ProposalDraft
from geode.queue.provenance import load_provenance
from tests.stores import GeodeEnv
from tests.template_stores import STORES, TRUTH, measure, write_store

NAMES = sorted(STORES)


@pytest.mark.parametrize("name", NAMES)
def test_the_duplicate_rule_finds_the_pair_written_twice_and_no_template_sibling(name, tmp_path):
    m = measure(name, tmp_path)
    assert m["report"].status == "ok", m["report"].message
    assert set(m["found"]) == TRUTH[name], m["found"]
    assert m["precision"] == 1.0 and m["recall"] == 1.0
    ex = m["report"].examined
    assert ex["pairs_compared"] > 0  # examined something: the siblings were compared and told apart
    if name != "runbooks":  # their siblings share text beyond the template: the subject tells them apart
        assert ex["pairs_other_subject"] > 0, ex


def _notes(root: Path) -> dict[str, str | None]:
    """``{path: status}`` of every note the store walk sees."""
    return {n.path: n.status for n in load_store(str(root), "d").notes}


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_three_nights_of_approving_everything_retire_nothing(name, tmp_path):
    root = write_store(name, tmp_path / name)
    settings, engine, _ = GeodeEnv(tmp_path, root=root)
    published = STORES[name][2]
    before = _notes(root)
    pub_before = {f for f in _files(root) if published and f.startswith(published + "/")}
    dup_findings: set[tuple[str, str]] = set()
    filed = []
    over_cap_later = []
    for night in (1, 2, 3):
        reports = run_upkeep(settings, engine, f"night-{night}")
        assert all(r.status in ("ok", "nothing-to-learn") for r in reports), [(r.agent, r.message) for r in reports]
        filed.append(sum(len(r.proposals) for r in reports))
        for r in reports:
            for f in r.findings:
                if f.kind == "near-duplicate":
                    dup_findings.add(tuple(sorted((f.path, f.target))))
                if f.kind == "folder-over-cap" and night > 1:
                    over_cap_later.append(f.message)
        for p in proposals.list_proposals(engine, status="pending"):
            res = apply.approve(settings, engine, p["id"], "person")
            assert res["ok"] or res["status"] == "conflict", res
    after = _notes(root)
    # no live note retired or moved
    gone = sorted(set(before) - set(after))
    assert gone == [], f"notes moved or removed: {gone}"
    retired = sorted(p for p, s in after.items() if p in before and s in RETIRED_STATUSES and s != before[p])
    assert retired == [], f"notes retired by the nights: {retired}"
    # nothing new in the tree the store's tool publishes
    if published:
        assert {f for f in _files(root) if f.startswith(published + "/")} == pub_before
    # the true duplicates found and shown (a proposal naming both), the template siblings not
    assert dup_findings == TRUTH[name]
    everything = proposals.list_proposals(engine)
    for a, b in TRUTH[name]:
        shown = [p for p in everything if a in p["title"] and b in p["title"]]
        assert shown, f"no proposal names both {a} and {b}"
        detail = proposals.get(engine, shown[0]["id"])
        assert [c["op"] for c in detail["changes"]] == ["create"]  # the draft only: neither note touched
        assert not (published and detail["changes"][0]["path"].startswith(published + "/"))
    assert (
        over_cap_later == []
    )  # the runbooks folder holds 50 of the person's notes, its cap: geode's draft is not counted
    assert filed[0] > 0 and filed[2] == 0, filed


def test_approving_a_draft_in_a_published_tree_writes_nothing_there(tmp_path):
    root = write_store("mkdocs_api", tmp_path / "site")
    settings, engine, _ = GeodeEnv(tmp_path, root=root)
    report = run_agent(settings, engine, "n1", "cleaner")
    [p] = [p for p in report.proposals if p["kind"] == "new_note"]
    assert p["paths"] == [".geode/drafts/docs/api/codec-encode.merge.md"]
    shown = proposals.get(engine, p["id"])
    assert "outside the tree its tool publishes" in shown["rationale"]
    docs_before = _files(root / "docs")
    assert apply.approve(settings, engine, p["id"], "person")["ok"]
    assert _files(root / "docs") == docs_before
    draft = (root / ".geode/drafts/docs/api/codec-encode.merge.md").read_text(encoding="utf-8")
    assert "supersedes" not in draft.split("---")[1] and "merge_of:" in draft
    assert "(../../../../docs/api/codec-encode.md)" in draft and "(../../../../docs/api/encode.md)" in draft


def test_a_store_inside_a_published_tree_gets_no_draft_file(tmp_path):
    site = tmp_path / "site"
    write_store("mkdocs_api", site)
    settings, engine, _ = GeodeEnv(tmp_path, root=site / "docs")  # the store is the docs folder itself
    report = run_agent(settings, engine, "n1", "cleaner")
    assert [p for p in report.proposals if p["kind"] == "new_note"] == []
    [f] = [f for f in report.findings if f.kind == "near-duplicate"]
    assert "no draft is written: mkdocs publishes the whole store" in f.message


# -- geode's own edits are never evidence ------------------------------------------------------------
def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _over_cap_store(tmp_path):
    files = {
        f"inbox/idea-{i}.md": f"---\nname: idea-{i}\n---\n# Idea {i}\n\nThought number {i}.\n" for i in range(1, 5)
    }
    files["inbox/old.md"] = "---\nname: old\nstatus: stable\n---\n# Old\n\nAn old thought.\n"
    return GeodeEnv(tmp_path, root="main").files(files, '[cleaner.caps]\n"inbox" = 4\n')


def _apply(settings, engine, agent, kind, changes, key):
    draft = ProposalDraft(agent, kind, settings.default_domain, key, "by hand", [{"finding": 1}], changes, "r", key)
    pid = proposals.file_proposal(settings, engine, draft)
    assert apply.approve(settings, engine, pid, "person")["ok"]
    return pid


def test_a_status_geode_wrote_does_not_justify_archiving_but_a_persons_does(tmp_path):
    from geode.queue.changes import set_frontmatter_status

    settings, engine, root = _over_cap_store(tmp_path)
    old = (root / "inbox/old.md").read_bytes()
    # the night before: a geode proposal set the status (what a merge used to do), approved
    pid = _apply(
        settings,
        engine,
        "cleaner",
        "status",
        [FileChange("inbox/old.md", _sha(old), set_frontmatter_status(old, "superseded", "inbox/old.md"))],
        "merge-status",
    )
    prov = load_provenance(engine, settings.default_domain)
    assert prov.wrote("inbox/old.md", "status", "superseded") == pid
    report = run_agent(settings, engine, "n2", "cleaner")
    [f] = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert [p for p in report.proposals if p["kind"] == "archive"] == [], report.proposals
    assert "no evidence to archive" in f.message
    # the person writes the same status themselves (a different value, then back: now theirs)
    text = (root / "inbox/old.md").read_text(encoding="utf-8").replace("status: superseded", "status: deprecated")
    (root / "inbox/old.md").write_text(text, encoding="utf-8")
    report = run_agent(settings, engine, "n3", "cleaner")
    [p] = [p for p in report.proposals if p["kind"] == "archive"]
    assert p["paths"][-1] == "inbox/old.md" or "inbox/old.md" in p["paths"]
    assert "status deprecated (written by a person)" in proposals.get(engine, p["id"])["rationale"]


def test_a_folder_cap_counts_the_persons_notes_not_geodes_files(tmp_path):
    settings, engine, root = _over_cap_store(tmp_path)
    (root / "inbox/old.md").unlink()  # four notes: at the cap
    stub = b"---\nname: stub\ntype: merge\nstatus: draft\nsupersedes: [idea-1]\n---\n# Merge\n"
    _apply(settings, engine, "cleaner", "new_note", [FileChange("inbox/idea-1.merge.md", None, stub)], "stub")
    report = run_agent(settings, engine, "n2", "cleaner")
    assert report.examined["notes_geode_made"] == 1
    assert [f for f in report.findings if f.kind == "folder-over-cap"] == []
    # and the stub's supersedes (geode's) makes no supersedes edge, so no status proposal on idea-1
    assert report.proposals == [] and report.examined["supersedes_edges"] == 0
    # the same file written by a person counts, and so does its supersedes
    (root / "inbox/mine.md").write_bytes(stub.replace(b"name: stub", b"name: mine"))
    report = run_agent(settings, engine, "n3", "cleaner")
    assert [f.path for f in report.findings if f.kind == "folder-over-cap"] == ["inbox"]
    assert report.examined["supersedes_edges"] == 1


def test_provenance_follows_moves_and_forgets_what_a_person_rewrote(tmp_path):
    from geode.queue.changes import move_changes, set_frontmatter_status

    settings, engine, root = _over_cap_store(tmp_path)
    d = settings.default_domain
    old = (root / "inbox/old.md").read_bytes()
    pid = _apply(
        settings,
        engine,
        "corrector",
        "status",
        [FileChange("inbox/old.md", _sha(old), set_frontmatter_status(old, "review_due", "inbox/old.md"))],
        "s",
    )
    _apply(settings, engine, "person", "move", move_changes(settings, d, "inbox/old.md", "kept/old.md"), "m")
    prov = load_provenance(engine, d)
    assert prov.moved == {"kept/old.md": "inbox/old.md"}
    assert prov.wrote("kept/old.md", "status", "review_due") == pid
    assert prov.wrote("kept/old.md", "name", "old") is None  # never changed by a proposal: the person's
    assert prov.wrote("kept/old.md", "status", "stable") is None  # a value geode did not write
    assert prov.made_by_geode("kept/old.md") is None  # a moved note is still the person's


@pytest.mark.parametrize(
    "files, note, expect",
    [
        ({"mkdocs.yml": "site_name: x\n"}, "docs/a.md", ".geode/drafts/docs/a.merge.md"),
        ({"mkdocs.yml": "site_name: x\ndocs_dir: pages\n"}, "docs/a.md", "docs/a.merge.md"),
        ({"mkdocs.yml": "site_name: x\ndocs_dir: pages\n"}, "pages/a.md", ".geode/drafts/pages/a.merge.md"),
        ({"book.toml": '[book]\ntitle = "x"\n'}, "src/a.md", ".geode/drafts/src/a.merge.md"),
        ({"book.toml": '[book]\nsrc = "chapters"\n'}, "chapters/a.md", ".geode/drafts/chapters/a.merge.md"),
        ({"hugo.toml": 'baseURL = "https://x.org/"\n'}, "content/posts/a.md", ".geode/drafts/content/posts/a.merge.md"),
        (
            {"config.toml": 'title = "x"\n', "content/_index.md": "# x\n"},
            "content/a.md",
            ".geode/drafts/content/a.merge.md",
        ),
        ({"config.toml": 'title = "x"\n'}, "notes/a.md", "notes/a.merge.md"),  # a config.toml alone is no site
        ({}, "notes/a.md", "notes/a.merge.md"),
        ({"mkdocs.yml": "site_name: x\n"}, "README.md", "README.merge.md"),  # outside docs/: not published
    ],
)
def test_drafts_go_where_the_stores_tool_publishes_nothing(tmp_path, files, note, expect):
    from geode.cleaner.published import draft_path

    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    assert draft_path(str(tmp_path), note, note.rsplit("/", 1)[-1][:-3]) == expect
    # a store that is the published folder itself has no place for a draft
    if expect.startswith(".geode/drafts/"):
        tree = expect.split("/")[2]
        (tmp_path / tree).mkdir(exist_ok=True)
        assert draft_path(str(tmp_path / tree), "a.md", "a") is None
