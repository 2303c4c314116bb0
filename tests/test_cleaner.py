"""The Cleaner on stores it did not grow up in, on a folder of a thousand, on two versions of
one truth (with the real embedding model), and its proposals applied and undone byte-exactly."""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from geode.agents.upkeep import run_agent
from geode.queue import apply, proposals
from tests.stores import GeodeEnv
from tests.upkeep_helpers import ALL_STORES, expected_of, setup

STORES = ALL_STORES + ["cleaner_truths"]


def expected_cleaner(name: str) -> dict:
    """The Cleaner's counts, kept apart from the stores (a file inside a fixture is copied into
    the store the tests build, and other tests list every file of it)."""
    return expected_of("cleaner", name)


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def kinds(report) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in report.proposals:
        out[p["kind"]] = out.get(p["kind"], 0) + 1
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", STORES)
def test_cleaner_counts_on_every_fixture(name, tmp_path):
    exp = expected_cleaner(name)
    settings, engine, root, _ = setup(name, tmp_path)
    report = run_agent(settings, engine, "run-1", "cleaner")
    assert report.status == "ok", report.message
    assert report.examined == exp["examined"]
    assert report.examined["notes"] == report.store_notes > 0
    assert sorted([f.kind, f.path, f.line, f.target] for f in report.findings) == exp["findings"]
    assert kinds(report) == exp["proposals"]
    assert len(report.skipped) == exp["skipped"]
    assert "Jaccard >= 0.50" in report.message and "cosine >= 0.95" in report.message
    for p in proposals.list_proposals(engine, run_id="run-1"):
        full = proposals.get(engine, p["id"])
        assert full["evidence"] and all("finding" in e or "ledger_event" in e for e in full["evidence"])


def test_a_dendron_vault_is_capped_by_its_dotted_hierarchy(tmp_path):
    """flat is 1,000 dotted names in one folder (Dendron's design: the hierarchy is in the
    names): 20 groups ``ops.<area>.<topic>.*`` of 50, none over the cap of 50, nothing archived."""
    settings, engine, root, _ = setup("flat", tmp_path)
    report = run_agent(settings, engine, "run-1", "cleaner")
    assert report.status == "ok", report.message
    assert report.examined["folders"] == 1 and report.examined["folders_capped"] == 20
    assert report.examined["folders_over_cap"] == 0
    assert [f for f in report.findings if f.kind == "folder-over-cap"] == []
    assert report.proposals == []
    assert "cap 50 per folder and dotted level" in report.message


def test_over_cap_with_an_empty_ledger_is_a_finding_and_no_archive(tmp_path):
    """The same vault with a cap of 10 per group and no ledger rows: every group is over, no
    note has evidence (no retired status, no supersedes, a ledger of 0 days), so nothing is
    proposed; each finding says why and how to split by the hierarchy."""
    settings, engine, root, _ = setup("flat", tmp_path, toml="[cleaner]\ncap = 10\n")
    report = run_agent(settings, engine, "run-1", "cleaner")
    assert report.status == "ok", report.message
    over = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert len(over) == 20 == report.examined["folders_over_cap"]
    assert {f.path for f in over} == {
        f"ops.{a}.{t}.*" for a in ("db", "net", "ci", "auth", "cache") for t in ("backup", "restore", "rotate", "audit")
    }
    for f in over:
        assert "holds 50 notes, over its cap of 10: 40 to archive" in f.message
        assert "50 note(s) have no evidence to archive them" in f.message
        assert "the ledger covers 0.0 days of the 30 needed" in f.message
        assert "split it" in f.message
    assert report.proposals == []


def test_a_plain_folder_over_cap_suggests_a_split_by_the_names(geode_env):
    for area in ("db", "net", "ci"):
        for i in range(5):
            geode_env.write(f"notes/{area}-note-{i}.md", f"# {area} {i}\n\nFact {area} {i}.\n")
    geode_env.toml("[cleaner]\ncap = 10\n")
    settings, engine, root = geode_env
    report = run_agent(settings, engine, "run-1", "cleaner")
    [f] = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert f.path == "notes" and "15 note(s) have no evidence" in f.message
    assert f.suggestion == "split it into subfolders by the names' leading word: ci (5), db (5), net (5)"
    assert report.proposals == []


def _thousand(tmp_path, ledger_days=40):
    """1,000 notes in notes/: 0-29 deprecated, 30-49 superseded by 950-969, 50-109 delivered in
    the ledger, last_verified increasing with the index from 2024-01-01. The ledger's oldest row
    is ``ledger_days`` before its newest (a blocked lookup: not a use)."""
    import datetime as dt

    from geode.records.models import LedgerEvent

    env = GeodeEnv(tmp_path)
    day0 = dt.date(2024, 1, 1)
    for i in range(1000):
        fm = [f"name: n{i:04d}", f"last_verified: {(day0 + dt.timedelta(days=i)).isoformat()}"]
        if i < 30:
            fm.append("status: deprecated")
        if 950 <= i < 970:
            fm.append(f"supersedes: [n{i - 920:04d}]")
        text = "---\n" + "\n".join(fm) + f"\n---\n# Note {i}\n\nFact number {i}.\n"
        env.write(f"notes/n{i:04d}.md", text)
    env.toml('[cleaner]\ncap = 50\n[cleaner.caps]\n"notes" = 900\n')
    settings, engine, root = env
    domain = next(iter(settings.domains))
    rows = [
        dict(
            event_id=uuid.uuid4().hex,
            ts=1_790_000_000.0 + i,
            kind="delivered",
            domain=domain,
            path=f"notes/n{i:04d}.md",
            crystal_id=f"{domain}:notes/n{i:04d}",
            action="bash",
            channel="act",
        )
        for i in range(50, 110)
        for _ in range(2)
    ]
    rows.append(
        dict(
            event_id=uuid.uuid4().hex,
            ts=1_790_000_000.0 - ledger_days * 86400.0,
            kind="blocked",
            domain=domain,
            path="x",
            crystal_id="",
            action="bash",
            channel="",
        )
    )
    with engine.begin() as conn:
        conn.execute(LedgerEvent.__table__.insert(), rows)
    return settings, engine, root


@pytest.mark.slow
def test_a_folder_of_a_thousand_gets_the_archives_the_evidence_chooses(tmp_path):
    settings, engine, root = _thousand(tmp_path)
    report = run_agent(settings, engine, "night-1", "cleaner")
    assert report.status == "ok", report.message
    ex = report.examined
    assert (ex["notes"], ex["folders"], ex["folders_over_cap"], ex["ledger_rows"], ex["notes_used"]) == (
        1000,
        1,
        1,
        120,
        60,
    )
    assert ex["supersedes_edges"] == 20
    [f] = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert (f.path, f.message.split(":")[0]) == ("notes", "notes holds 1000 notes, over its cap of 900")
    assert kinds(report) == {"archive": 100}
    chosen = sorted(int(p["paths"][-1][len("notes/n") : -3]) for p in report.proposals)
    # 30 retired, 20 superseded, then the 50 never-used notes with the oldest last_verified
    assert chosen == list(range(0, 50)) + list(range(110, 160))
    # used notes are never chosen while unused ones remain
    assert not set(chosen) & set(range(50, 110))
    rationales = {p["paths"][-1]: proposals.get(engine, p["id"])["rationale"] for p in report.proposals}
    assert "status deprecated" in rationales["notes/n0000.md"]
    assert "superseded by a live note" in rationales["notes/n0030.md"]
    assert "never delivered or read in the ledger" in rationales["notes/n0110.md"]
    assert "not delivered or read in the last 30 days of a ledger that covers 40 days" in rationales["notes/n0110.md"]

    before = snapshot(root)
    for p in report.proposals:
        assert apply.approve(settings, engine, p["id"], "tester")["ok"]
    assert len(list((root / "notes").iterdir())) == 900
    assert len(list((root / "archive" / "notes").iterdir())) == 100
    again = run_agent(settings, engine, "night-2", "cleaner")
    assert again.status == "ok" and again.examined["notes"] == 1000
    assert again.examined["folders_over_cap"] == 0 and again.proposals == []
    for p in reversed(report.proposals):
        assert apply.undo(settings, engine, p["id"], "tester")["ok"]
    assert snapshot(root) == before


def test_a_young_ledger_is_no_evidence_that_a_note_is_unused(tmp_path):
    """The same thousand with a ledger of 2 minutes: only the 30 retired and the 20 superseded
    notes are archived; the finding says the other 50 have no evidence."""
    settings, engine, root = _thousand(tmp_path, ledger_days=0)
    report = run_agent(settings, engine, "night-1", "cleaner")
    assert report.status == "ok", report.message
    assert kinds(report) == {"archive": 50}
    chosen = sorted(int(p["paths"][-1][len("notes/n") : -3]) for p in report.proposals)
    assert chosen == list(range(0, 50))
    [f] = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert "50 archive proposal(s) made, 950 note(s) have no evidence" in f.message
    assert "the ledger covers 0.0 days of the 30 needed" in f.message


def test_archiving_rewrites_links_by_path_and_the_librarian_finds_nothing_broken(geode_env):
    settings, engine, root = geode_env.files(
        {
            "guide/old.md": "---\nstatus: deprecated\n---\n# Old\n\nSee [the new one](new.md) and [home](../index.md).\n",
            "guide/new.md": "# New\n\nThe current way. Was [old](./old.md#old).\n",
            "guide/third.md": "# Third\n\n[[old]] still resolves by name.\n",
            "index.md": "# Index\n\n- [old](guide/old.md)\n- [new](guide/new.md)\n",
        },
        toml='[cleaner.caps]\n"guide" = 2\n',
    )
    before = snapshot(root)
    report = run_agent(settings, engine, "r1", "cleaner")
    assert report.status == "ok", report.message
    assert [(p["kind"], p["paths"]) for p in report.proposals] == [
        ("archive", ["archive/guide/old.md", "guide/new.md", "index.md", "guide/old.md"])
    ]
    assert apply.approve(settings, engine, report.proposals[0]["id"], "tester")["ok"]
    moved = (root / "archive" / "guide" / "old.md").read_text(encoding="utf-8")
    assert "status: archived" in moved and "(../../guide/new.md)" in moved and "(../../index.md)" in moved
    assert "(../archive/guide/old.md#old)" in (root / "guide" / "new.md").read_text(encoding="utf-8")
    assert "(archive/guide/old.md)" in (root / "index.md").read_text(encoding="utf-8")
    lib = run_agent(settings, engine, "r2", "librarian")
    assert lib.status == "ok"
    assert [f for f in lib.findings if f.kind in ("broken-link", "broken-anchor", "missing-path")] == []
    assert apply.undo(settings, engine, report.proposals[0]["id"], "tester")["ok"]
    assert snapshot(root) == before


def test_two_versions_of_one_truth_applied_then_nothing_new_then_undone(tmp_path):
    settings, engine, root, _ = setup("cleaner_truths", tmp_path)
    before = snapshot(root)
    report = run_agent(settings, engine, "night-1", "cleaner")
    assert report.status == "ok"
    by_title = {p["title"]: p for p in report.proposals}
    loop = by_title["Break the supersedes loop at cache-ttl-b.md"]
    assert loop["paths"] == ["cache-ttl-b.md", "cache-ttl-a.md"]
    merge = by_title["Draft a merge of near-duplicates restarting-workers.md and worker-restart.md"]
    assert merge["kind"] == "new_note"
    assert merge["paths"] == ["restarting-workers.merge.md"]  # the draft only: a merge retires nothing by itself
    # the near-duplicate needs both tests: worker-scale-out is close in meaning, not in text
    dup = [f for f in report.findings if f.kind == "near-duplicate"]
    assert [(f.path, f.target) for f in dup] == [("restarting-workers.md", "worker-restart.md")]
    for p in report.proposals:
        assert apply.approve(settings, engine, p["id"], "tester")["ok"]
    b = (root / "cache-ttl-b.md").read_text(encoding="utf-8")
    assert "status: superseded" in b and "cache-ttl-c" not in b.split("---")[1]
    stub = (root / "restarting-workers.merge.md").read_text(encoding="utf-8")
    assert "](restarting-workers.md)" in stub and "](worker-restart.md)" in stub and "status: draft" in stub
    assert "supersedes" not in stub.split("---")[1]  # no one is retired by geode's draft
    assert "Celery" not in stub  # no wording of theirs: the merge is a person's to write
    for name in ("retry-cutoff-2025.md", "deploy-window-2025.md", "cache-ttl-a.md"):
        assert "status: superseded" in (root / name).read_text(encoding="utf-8"), name
    for name in ("restarting-workers.md", "worker-restart.md"):  # a person says which stays
        assert "superseded" not in (root / name).read_text(encoding="utf-8"), name
    again = run_agent(settings, engine, "night-2", "cleaner")
    assert again.status == "ok" and again.examined["notes"] == 12 and again.examined["notes_geode_made"] == 1
    assert again.proposals == []
    [left] = again.findings  # the pair is still two notes, until a person merges them
    assert (left.kind, left.path, left.target) == ("near-duplicate", "restarting-workers.md", "worker-restart.md")
    assert "a merge draft is at restarting-workers.merge.md" in left.message
    for p in reversed(report.proposals):
        assert apply.undo(settings, engine, p["id"], "tester")["ok"]
    assert snapshot(root) == before


def test_blocking_compares_far_fewer_pairs_than_all(tmp_path):
    """Templated notes (the flat store) share their boilerplate: it is dropped, and the MinHash
    blocking compares a handful of pairs of 499,500."""
    import random

    from geode.cleaner import similar as sim

    rnd = random.Random(7)
    word = lambda: "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(5, 9)))  # noqa: E731
    texts = [
        f"Runbook {i}: rotate the credentials and page the owner. " + " ".join(word() for _ in range(30))
        for i in range(1000)
    ]
    texts.append(texts[10] + " Also check the audit log.")
    df = sim.DocFreq()
    shs = [sim.shingles(t) for t in texts]
    for sh in shs:
        df.add(sh)
    sigs = {
        i: sim.signature(df.distinctive(sh)) for i, sh in enumerate(shs) if len(df.distinctive(sh)) >= sim.MIN_SHINGLES
    }
    assert len(sigs) == 1001
    pairs, oversize = sim.candidate_pairs(sigs)
    assert (10, 1000) in pairs
    assert len(pairs) < 1001 * 1000 // 2 // 100 and oversize == []
    assert sim.jaccard(df.distinctive(shs[10]), df.distinctive(shs[1000])) > 0.8


def test_archive_proposals_per_run_are_limited_and_the_finding_says_so(geode_env):
    """A store far over its caps gets at most ``[cleaner] max_archives`` archive proposals a
    night (49,075 at 100,000 notes before the limit); the finding says how many follow."""
    for d in range(3):
        for i in range(30):
            geode_env.write(f"f{d}/n{i:02d}.md", f"---\nname: f{d}-n{i:02d}\nstatus: deprecated\n---\nNote {d}-{i}.\n")
    geode_env.toml("[cleaner]\ncap = 10\nmax_archives = 25\n")
    settings, engine, root = geode_env
    report = run_agent(settings, engine, "limit-run", "cleaner")
    archives = [p for p in report.proposals if p["kind"] == "archive"]
    assert len(archives) == 25  # 3 folders x 20 over cap = 60 wanted
    over = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert len(over) == 3
    assert sum("reached its limit of 25" in f.message for f in over) == 2  # the 2nd folder hits it, the 3rd gets none


def test_a_closed_validity_window_is_evidence_to_archive(geode_env):
    """Over cap by one, no ledger at all: the one note whose valid_to has passed is archived, the
    others (no evidence) are not."""
    settings, engine, root = geode_env.files(
        {
            "facts/a.md": "---\nname: a\nvalid_to: 2020-01-01\n---\nA fact that ended.\n",
            "facts/b.md": "---\nname: b\n---\nA fact.\n",
            "facts/c.md": "---\nname: c\nvalid_to: 2999-01-01\n---\nA fact still in force.\n",
        },
        toml='[cleaner.caps]\n"facts" = 1\n',
    )
    report = run_agent(settings, engine, "r1", "cleaner")
    assert [(p["kind"], p["paths"][-1]) for p in report.proposals] == [("archive", "facts/a.md")]
    assert "validity window closed 2020-01-01" in proposals.get(engine, report.proposals[0]["id"])["rationale"]
    [f] = [f for f in report.findings if f.kind == "folder-over-cap"]
    assert "1 archive proposal(s) made, 2 note(s) have no evidence" in f.message
