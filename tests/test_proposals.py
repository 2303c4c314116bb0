"""The approval queue on SQLite and on PostgreSQL: filing (idempotent by run_id + key, also
from concurrent processes), validation, filters, decisions recorded with who and when, the
diff, bulk approval and its dry run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from geode.queue import apply as A
from geode.queue import atomic_put
from geode.queue import changes as CH
from geode.queue import proposals as Q
from geode.queue import review as queue_review
from geode.queue import tables as queue_tables
from tests.stores import plain_settings, snapshot, write
from tests.test_apply import draft, status_of


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def queue(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    s = plain_settings(tmp_path / "home", tmp_path / "store", database_url=url)
    engine = Q.open_queue(s)
    assert engine.dialect.name == request.param
    yield s, engine, Path(s.domains["main"])
    engine.dispose()


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one() for t in queue_tables.TABLES}


def test_filing_is_idempotent_by_run_and_key(queue):
    s, engine, root = queue
    write(root, "a.md", b"old\n")
    d = draft("edit", [CH.edit_change(s, "main", "a.md", b"new\n")], key="fix-a", run_id="run-7")
    pid = Q.file_proposal(s, engine, d)
    assert isinstance(pid, int)
    assert Q.file_proposal(s, engine, d) is None
    # the same key in another run is another proposal; the same run with another key too
    assert Q.file_proposal(s, engine, draft("edit", d.changes, key="fix-a", run_id="run-8")) not in (None, pid)
    assert Q.file_proposal(s, engine, draft("edit", d.changes, key="fix-b", run_id="run-7")) is not None
    assert len(Q.list_proposals(engine, run_id="run-7")) == 2
    # a rerun after the proposal was applied is still "already filed", not a conflict
    assert A.approve(s, engine, pid, "t")["ok"]
    assert Q.file_proposal(s, engine, d) is None


def _file_in_child(settings, d) -> int:
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 3
        try:
            engine = Q.open_queue(settings)
            pid = Q.file_proposal(settings, engine, d)
            code = 0 if pid is None else 1
        finally:
            os._exit(code)
    return child


def test_concurrent_filing_of_the_same_key_files_once(queue):
    s, engine, root = queue
    write(root, "a.md", b"old\n")
    d = draft("edit", [CH.edit_change(s, "main", "a.md", b"new\n")], key="k", run_id="race")
    engine.dispose()  # no connection crosses the fork
    children = [_file_in_child(s, d) for _ in range(8)]
    codes = sorted(os.waitstatus_to_exitcode(os.waitpid(c, 0)[1]) for c in children)
    assert codes == [0] * 7 + [1], codes  # exactly one filed it; seven saw it filed
    assert len(Q.list_proposals(engine, run_id="race")) == 1
    assert counts(engine)["proposal_change"] == 1


def test_a_draft_is_validated(queue):
    s, engine, root = queue
    write(root, "a.md", b"old\n")
    ok = CH.edit_change(s, "main", "a.md", b"new\n")
    bad = [
        (draft("rename", [ok]), "kind"),
        (draft("edit", []), "at least one"),
        (draft("edit", [ok, ok]), "twice"),
        (draft("edit", [Q.FileChange("../a.md", ok.before_sha, b"x")]), "unsafe"),
        (draft("edit", [Q.FileChange("a.md", ok.before_sha, b"old\n")]), "changes nothing"),
        (draft("edit", [Q.FileChange("a.md", "0" * 63, b"x")]), "64"),
        (draft("edit", [Q.FileChange("b.md", None, b"x")]), "existing"),
        (draft("new_note", [ok]), "creates"),
        (draft("move", [ok]), "exactly one"),
        (draft("edit", [ok], domain="elsewhere"), "unknown domain"),
    ]
    nothing = draft("edit", [ok])
    nothing.evidence = []
    bad.append((nothing, "evidence"))
    for d, why in bad:
        with pytest.raises(Q.ProposalError, match=why):
            Q.file_proposal(s, engine, d)
    assert counts(engine)["proposal"] == 0
    assert (root / "a.md").read_bytes() == b"old\n"


def test_filters_and_decisions_are_recorded_with_who_and_when(queue):
    s, engine, root = queue
    for name in ("a", "b", "c"):
        write(root, f"{name}.md", f"---\nname: {name}\n---\nbody\n".encode())
    t0 = time.time()
    e = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "a.md", b"A\n")], agent="corrector"))
    st = Q.file_proposal(s, engine, draft("status", [CH.status_change(s, "main", "b.md", "deprecated")]))
    ar = Q.file_proposal(s, engine, draft("archive", CH.archive_changes(s, "main", "c.md"), agent="cleaner"))
    assert [p["id"] for p in Q.list_proposals(engine)] == [e, st, ar]
    assert [p["id"] for p in Q.list_proposals(engine, agent="librarian")] == [st]
    assert [p["id"] for p in Q.list_proposals(engine, kind="archive")] == [ar]
    assert [p["id"] for p in Q.list_proposals(engine, domain="main", status="pending")] == [e, st, ar]
    assert Q.list_proposals(engine, domain="other") == []
    assert Q.list_proposals(engine, kind="archive")[0]["paths"] == ["archive/c.md", "c.md"]

    assert A.approve(s, engine, st, "alice")["ok"]
    assert b"status: deprecated" in (root / "b.md").read_bytes()
    r = queue_review.reject(s, engine, e, "bob", "not worth it")
    assert r["ok"] and r["status"] == "rejected"
    assert not A.approve(s, engine, e, "carol")["ok"]  # a rejected proposal is not applied
    assert (root / "a.md").read_bytes().startswith(b"---\nname: a")
    assert not queue_review.reject(s, engine, st, "bob")["ok"]  # an applied one is undone, not rejected
    assert A.approve(s, engine, ar, "dave")["ok"]
    assert not (root / "c.md").exists()
    assert (root / "archive/c.md").read_bytes() == b"---\nname: c\nstatus: archived\n---\nbody\n"

    assert [p["id"] for p in Q.list_proposals(engine, status="applied")] == [st, ar]
    acts = Q.get(engine, e)["actions"]
    assert [(a["action"], a["outcome"], a["who"]) for a in acts] == [
        ("filed", "pending", "corrector"),
        ("reject", "rejected", "bob"),
        ("approve", "refused", "carol"),
    ]
    assert acts[1]["detail"] == {"reason": "not worth it"}
    with engine.connect() as conn:
        ats = conn.execute(select(queue_tables.ProposalAction.__table__.c.at)).scalars().all()
    assert all(t0 - 1 <= t <= time.time() + 1 for t in ats) and len(ats) == 8
    assert all(a["at"].endswith("Z") for a in acts)


def test_show_gives_the_unified_diff_and_the_evidence(queue):
    s, engine, root = queue
    write(root, "notes/old.md", b"---\nname: old\n---\nessence\n")
    write(root, "index.md", b"- [[old]]\n- [[other]]\n")
    changes = CH.move_changes(
        s, "main", "notes/old.md", "notes/new.md", rewrites={"index.md": b"- [[new]]\n- [[other]]\n"}
    )
    d = draft("move", changes)
    d.evidence = [{"finding": 12}, {"ledger_event": "e1"}]
    pid = Q.file_proposal(s, engine, d)
    text = queue_review.diff(engine, pid)
    assert text.startswith("rename from notes/old.md\nrename to notes/new.md\n")
    assert "--- a/index.md\n+++ b/index.md\n" in text and "-- [[old]]\n+- [[new]]\n" in text
    p = Q.get(engine, pid)
    assert p["evidence"] == [{"finding": 12}, {"ledger_event": "e1"}]
    assert [(c["path"], c["op"]) for c in p["changes"]] == [
        ("notes/new.md", "create"),
        ("index.md", "modify"),
        ("notes/old.md", "delete"),
    ]
    assert p["changes"][0]["before_sha"] is None and p["changes"][2]["after_sha"] is None
    assert Q.get(engine, 9999) is None


def test_diff_marks_a_missing_final_newline_and_binary_files(queue):
    s, engine, root = queue
    write(root, "a.md", b"one\ntwo")
    write(root, "b.bin", b"\x00\x01")
    p1 = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "a.md", b"one\nthree\n")]))
    p2 = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "b.bin", b"\x00\x02")]))
    assert "-two\n\\ No newline at end of file\n+three\n" in queue_review.diff(engine, p1)
    assert "Binary files a/b.bin and b/b.bin differ" in queue_review.diff(engine, p2)


def test_bulk_approve_dry_run_changes_nothing(queue):
    s, engine, root = queue
    for i in range(4):
        write(root, f"n{i}.md", b"x\n")
    ids = [
        Q.file_proposal(
            s,
            engine,
            draft(
                "edit", [CH.edit_change(s, "main", f"n{i}.md", b"y%d\n" % i)], agent="librarian" if i < 3 else "cleaner"
            ),
        )
        for i in range(4)
    ]
    (root / "n1.md").write_bytes(b"edited by a person\n")  # this one would conflict
    files_before, rows_before = snapshot(root), counts(engine)
    res = A.approve_many(s, engine, "alice", agent="librarian", kind="edit", dry_run=True)
    assert [(r["id"], r["would"]) for r in res] == [(ids[0], "apply"), (ids[1], "conflict"), (ids[2], "apply")]
    assert snapshot(root) == files_before and counts(engine) == rows_before
    assert all(status_of(engine, i) == "pending" for i in ids)
    with pytest.raises(Q.ProposalError):
        A.approve_many(s, engine, "alice")  # no filter: refused, never "approve everything"
    res = A.approve_many(s, engine, "alice", agent="librarian", kind="edit")
    assert [(r["id"], r["status"]) for r in res] == [(ids[0], "applied"), (ids[1], "conflict"), (ids[2], "applied")]
    assert status_of(engine, ids[3]) == "pending" and (root / "n3.md").read_bytes() == b"x\n"
    assert (root / "n1.md").read_bytes() == b"edited by a person\n"


def test_apply_undo_and_reconcile_on_this_database(queue):
    """The journal and its reconcile work the same on both databases: an apply cut short after
    the intent is committed is finished by the next start."""
    from geode.queue import apply as A

    s, engine, root = queue
    write(root, "a.md", b"old\n", 0o600)
    pid = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "a.md", b"new\n")]))

    class Crash(BaseException):
        pass

    def hook(step, _path):
        if step == "fsync":
            raise Crash()

    A_after = atomic_put.after_step
    atomic_put.after_step = hook
    try:
        with pytest.raises(Crash):
            A.approve(s, engine, pid, "t")
    finally:
        atomic_put.after_step = A_after
    assert (root / "a.md").read_bytes() == b"old\n"
    reports = A.reconcile(s, engine)
    assert [(r["id"], r["outcome"], r["files"]) for r in reports] == [
        (pid, "finished", [{"path": "a.md", "found": "before"}])
    ]
    assert (root / "a.md").read_bytes() == b"new\n" and status_of(engine, pid) == "applied"
    assert A.undo(s, engine, pid, "t")["ok"]
    assert (root / "a.md").read_bytes() == b"old\n" and (root / "a.md").stat().st_mode & 0o777 == 0o600
    assert [a["action"] for a in Q.get(engine, pid)["actions"]] == ["filed", "reconcile", "undo"]
