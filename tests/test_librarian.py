"""The Librarian on stores it did not grow up in: each fixture's hand-counted EXPECTED.json.

Every fixture is copied (or generated) under tmp_path, the Librarian runs through the real
upkeep runner (records in SQLite, proposals filed in the real approval queue), and the test
asserts the exact notes examined, the exact findings (kind, file, line, target, suggestion),
the number of things skipped with a reason, and the proposals filed.
"""

from __future__ import annotations

import hashlib

import pytest

from geode.agents.upkeep import run_agent
from geode.queue import apply, proposals
from geode.queue import changes as CH
from geode.queue import review as queue_review
from tests.upkeep_helpers import ALL_STORES, BROKEN_KINDS, FOREIGN, expected, setup


@pytest.mark.parametrize("name", ALL_STORES)
def test_librarian_finds_exactly_what_is_broken(name, tmp_path):
    exp = expected(name)
    settings, engine, root, manifest = setup(name, tmp_path)
    report = run_agent(settings, engine, "run-1", "librarian")

    assert report.status == "ok", report.message
    assert report.store_notes == exp["examined"]["notes"]
    for key, value in exp["examined"].items():
        assert report.examined.get(key, 0) == value, (key, report.examined)

    got = sorted((f.kind, f.path, f.line, f.target, f.suggestion) for f in report.findings)
    if "findings" in exp:
        assert got == sorted(tuple(f) for f in exp["findings"])
    else:  # the generated flat store: counts by kind, and the exact broken set from its manifest
        kinds: dict[str, int] = {}
        for f in report.findings:
            kinds[f.kind] = kinds.get(f.kind, 0) + 1
        assert kinds == exp["counts"]
        want = {(p, line, t) for p, line, t in manifest["broken"] + manifest["aliased"]}
        assert {(f.path, f.line, f.target) for f in report.findings} == want
        aliased = {p for p, _l, _t in manifest["aliased"]}
        assert {f.path for f in report.findings if f.suggestion} == aliased
    assert sum(1 for f in report.findings if f.kind in BROKEN_KINDS) == exp["broken_links"]
    assert len(report.skipped) == exp["skipped"], [s.as_dict() for s in report.skipped]
    assert all(s.reason for s in report.skipped)
    assert len(report.proposals) == exp["proposals"]
    # every proposal is an edit of one file that rests on stored findings with a suggestion
    filed = proposals.list_proposals(engine, run_id="run-1")
    assert [p["id"] for p in filed] == sorted(p["id"] for p in report.proposals)
    for p in report.proposals:
        assert p["kind"] == "edit" and len(p["paths"]) == 1
        full = proposals.get(engine, p["id"])
        evidence = full["evidence"] if isinstance(full["evidence"], list) else []
        assert evidence and all("finding" in e for e in evidence)
        ids = {f.id for f in report.findings if f.suggestion and f.path == p["paths"][0]}
        assert {e["finding"] for e in evidence} <= ids


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in ALL_STORES if expected(n)["proposals"]])
def test_applying_the_rewrites_fixes_those_links_and_undo_restores_bytes(name, tmp_path):
    settings, engine, root, _ = setup(name, tmp_path)
    first = run_agent(settings, engine, "night-1", "librarian")
    assert first.proposals
    fixed = {
        (f.path, f.line) for f in first.findings if f.suggestion and any(f.path in p["paths"] for p in first.proposals)
    }
    before = {p["paths"][0]: (root / p["paths"][0]).read_bytes() for p in first.proposals}
    for p in first.proposals:
        res = apply.approve(settings, engine, p["id"], "tester")
        assert res["ok"], res
    second = run_agent(settings, engine, "night-2", "librarian")
    assert second.status == "ok"
    left = {(f.path, f.line) for f in second.findings}
    assert fixed and not (fixed & left)
    assert len(second.findings) == len(first.findings) - len(fixed)
    assert second.proposals == []
    for p in first.proposals:
        res = apply.undo(settings, engine, p["id"], "tester")
        assert res["ok"], res
    for path, data in before.items():
        assert hashlib.sha256((root / path).read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()


def test_flat_store_link_order_is_detected_as_alias_first(tmp_path):
    settings, engine, root, _ = setup("flat", tmp_path)
    report = run_agent(settings, engine, "r", "librarian")
    assert "[[alias|target]]" in report.message
    # a rewrite keeps the store's order: the display text stays first
    pid = report.proposals[0]["id"]
    text = queue_review.diff(engine, pid)
    plus = [ln for ln in text.splitlines() if ln.startswith("+Next")]
    assert len(plus) == 1 and plus[0].startswith("+Next: [[Next step|ops.")


def test_renamed_note_is_suggested_from_the_move_history(tmp_path):
    """A name that matches nothing loosely is still resolved when an applied move says where it went."""
    settings, engine, root, _ = setup("plain_notes", tmp_path)
    domain = settings.default_domain
    changes = CH.move_changes(settings, domain, "todo.md", "lists/shopping-and-reading.md")
    pid = proposals.file_proposal(
        settings,
        engine,
        proposals.ProposalDraft(
            "tester", "move", domain, "move todo", "a person moved it", [{"ledger_event": 1}], changes, "m", "k"
        ),
    )
    assert apply.approve(settings, engine, pid, "tester")["ok"]
    (root / "plan.md").write_text("# Plan\n\nSee [the list](todo.md) and [[shell pipes]].\n", encoding="utf-8")
    report = run_agent(settings, engine, "after-move", "librarian")
    hits = [f for f in report.findings if f.path == "plan.md" and f.kind != "orphan"]
    assert [(f.kind, f.line, f.target, f.suggestion) for f in hits] == [
        ("broken-link", 3, "todo.md", "lists/shopping-and-reading.md")
    ]
    props = [p for p in report.proposals if p["paths"] == ["plan.md"]]
    assert len(props) == 1
    assert "+See [the list](lists/shopping-and-reading.md)" in queue_review.diff(engine, props[0]["id"])


def test_two_candidates_make_no_proposal(tmp_path):
    settings, engine, root, _ = setup("plain_notes", tmp_path)
    (root / "a.md").write_text("---\naliases: [Pipes]\n---\n# A\n[[shell pipes]]\n", encoding="utf-8")
    (root / "b.md").write_text("---\naliases: [pipes]\n---\n# B\n[[a]] [[Pipes]]\n", encoding="utf-8")
    report = run_agent(settings, engine, "r", "librarian")
    f = [f for f in report.findings if f.path == "b.md" and f.kind != "orphan"]
    assert [(x.kind, x.target, x.suggestion) for x in f] == [("broken-link", "Pipes", "")]
    assert not [p for p in report.proposals if "b.md" in p["paths"]]


def test_crystals_that_can_never_fire_come_from_the_delivery_lint(tmp_path):
    settings, engine, root, _ = setup("clean", tmp_path)
    (root / "hollow.md").write_text(
        "---\nname: hollow\ncrystal:\n  deliver: act\n  on: bash\n  match: rm -rf\n---\n"
        "No essence markers here.\n\n## Where this came from\nA test.\n[[README]]\n",
        encoding="utf-8",
    )
    (root / "README.md").write_text((root / "README.md").read_text() + "- [[hollow]]\n", encoding="utf-8")
    report = run_agent(settings, engine, "r", "librarian")
    assert [(f.kind, f.path, f.target) for f in report.findings] == [("never-fires", "hollow.md", "no-essence")]


@pytest.mark.parametrize("name", FOREIGN)
def test_every_note_file_is_counted_against_the_census(name, tmp_path):
    """The agent's own count equals a walk it does not control."""
    from geode.agents.contract import census

    settings, engine, root, _ = setup(name, tmp_path)
    report = run_agent(settings, engine, "r", "librarian")
    assert report.examined["notes"] == census(settings).notes == expected(name)["examined"]["notes"]
