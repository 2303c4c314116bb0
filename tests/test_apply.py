"""Applying proposals: crash points, I/O errors, concurrent edits, undo after a later edit
(the byte-exact, reversible edits of docs/DESIGN.md, "Upkeep and the approval queue"), on real files and a real SQLite queue.

Crashes are real: a forked child applies with ``geode.queue.atomic_put.after_step`` replaced by one
that calls ``os._exit`` after the chosen step; the parent then reconciles as the next start
would. I/O errors are injected by replacing ``os.fsync``, ``os.replace``, ``os.write``,
``os.fchmod`` and ``os.open`` with versions that raise EIO or ENOSPC at the Nth call.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import stat
import uuid
from pathlib import Path

import pytest
from sqlalchemy import select

from geode.queue import apply as A
from geode.queue import atomic_put
from geode.queue import changes as CH
from geode.queue import proposals as Q
from geode.queue import tables as queue_tables
from tests.stores import plain_settings, snapshot, write

RUNS_PER_POINT = 20
CRASH_POINTS = ("write", "fsync", "chmod", "replace", "dir_fsync", "journal_mark")


# -- helpers shared with the other test_apply*/test_proposals* modules -----------------------
def sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(".geode-*.tmp")]


def draft(
    kind: str,
    changes,
    key: str | None = None,
    agent: str = "librarian",
    run_id: str = "run-1",
    domain: str = "main",
    title: str | None = None,
) -> Q.ProposalDraft:
    return Q.ProposalDraft(
        agent=agent,
        kind=kind,
        domain=domain,
        title=title or f"{kind} proposal",
        rationale="because the test says so",
        evidence=[{"finding": 1}],
        changes=list(changes),
        run_id=run_id,
        key=key or uuid.uuid4().hex,
    )


def open_journals(engine) -> list:
    J = queue_tables.ProposalJournal.__table__
    with engine.connect() as conn:
        return conn.execute(select(J.c.id).where(J.c.state == "open")).all()


def status_of(engine, pid: int) -> str:
    return Q.get(engine, pid)["status"]


def move_store(root: Path, rng: random.Random) -> dict[str, bytes]:
    """Three files: a note to move, one that links to it, one untouched."""
    files = {
        "notes/old name.md": b"---\nname: old\n---\n" + rng.randbytes(rng.randint(0, 300)),
        "index.md": b"# Index\r\n- [[old name]]\r\n" + bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 40))),
        "other.md": b"untouched\n",
    }
    modes = {"notes/old name.md": 0o600, "index.md": 0o644, "other.md": 0o644}
    for rel, data in files.items():
        write(root, rel, data, modes[rel])
    return files


def file_move(settings, engine, files: dict[str, bytes]) -> int:
    changes = CH.move_changes(
        settings,
        "main",
        "notes/old name.md",
        "moved/new name.md",
        rewrites={"index.md": files["index.md"].replace(b"[[old name]]", b"[[new name]]") + b"!"},
    )
    pid = Q.file_proposal(settings, engine, draft("move", changes))
    assert pid is not None
    return pid


@pytest.fixture()
def queue(tmp_path):
    """(settings, engine, root) on SQLite."""
    s = plain_settings(tmp_path / "home", tmp_path / "store")
    engine = Q.open_queue(s)
    yield s, engine, Path(s.domains["main"])
    engine.dispose()


# -- the basics ------------------------------------------------------------------------------
def test_apply_then_undo_restores_bytes_and_modes(queue):
    s, engine, root = queue
    files = move_store(root, random.Random(1))
    before = snapshot(root)
    pid = file_move(s, engine, files)
    r = A.approve(s, engine, pid, "alice")
    assert r["ok"] and r["status"] == "applied", r
    after = snapshot(root)
    assert "notes/old name.md" not in after
    assert after["moved/new name.md"] == before["notes/old name.md"]  # same bytes, same mode 0600
    assert (root / "index.md").read_bytes().endswith(b"[[new name]]\r\n" + files["index.md"].split(b"\r\n")[-1] + b"!")
    r = A.undo(s, engine, pid, "bob")
    assert r["ok"] and r["status"] == "undone", r
    assert snapshot(root) == before
    acts = [(a["action"], a["outcome"], a["who"]) for a in Q.get(engine, pid)["actions"]]
    assert acts == [("filed", "pending", "librarian"), ("approve", "applied", "alice"), ("undo", "undone", "bob")]
    assert not leftovers(root) and not open_journals(engine)


def test_new_file_gets_the_requested_mode_and_undo_removes_it(queue):
    s, engine, root = queue
    pid = Q.file_proposal(s, engine, draft("new_note", [CH.new_note_change(s, "main", "stubs/x.md", "stub\n", 0o640)]))
    assert A.approve(s, engine, pid, "a")["ok"]
    assert stat.S_IMODE((root / "stubs/x.md").stat().st_mode) == 0o640
    assert A.undo(s, engine, pid, "a")["ok"]
    assert not (root / "stubs/x.md").exists()


def test_existing_file_keeps_its_mode_when_the_proposal_names_none(queue):
    s, engine, root = queue
    write(root, "a.md", b"old\n", 0o600)
    pid = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "a.md", b"new\n")]))
    os.chmod(root / "a.md", 0o640)  # the mode is not content: no conflict, and it is kept
    assert A.approve(s, engine, pid, "a")["ok"]
    assert stat.S_IMODE((root / "a.md").stat().st_mode) == 0o640
    assert A.undo(s, engine, pid, "a")["ok"]
    assert (root / "a.md").read_bytes() == b"old\n" and stat.S_IMODE((root / "a.md").stat().st_mode) == 0o640


# -- row 6: crash points ----------------------------------------------------------------------
def _crash_in_child(settings, pid: int, op: str, step: str, nth: int) -> int:
    """Fork; the child applies (or undoes) and dies by os._exit right after the nth ``step``."""
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            engine = Q.open_queue(settings)
            seen = {"n": 0}

            def hook(name, _path):
                if name == step:
                    seen["n"] += 1
                    if seen["n"] == nth:
                        os._exit(77)

            atomic_put.after_step = hook
            (A.approve if op == "apply" else A.undo)(settings, engine, pid, "crash-test")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


#: How often each step happens in one apply of the three-file move: the new file and the
#: rewrite are written (2), the source is removed (replace and dir fsync: 3).
STEP_COUNTS = {"journal_intent": 1, "write": 2, "fsync": 2, "chmod": 2, "replace": 3, "dir_fsync": 3, "journal_mark": 1}


@pytest.mark.slow
@pytest.mark.parametrize("step", CRASH_POINTS + ("journal_intent",))
def test_crash_at_each_step_leaves_before_or_after_and_reconcile_settles_it(tmp_path, step):
    s = plain_settings(tmp_path / "home", tmp_path / "stores" / "s0")
    engine = Q.open_queue(s)
    rng = random.Random(f"crash-{step}")
    runs = RUNS_PER_POINT if step != "journal_intent" else 5
    for run in range(runs):
        root = tmp_path / "stores" / f"s{run}"
        s = plain_settings(tmp_path / "home", root)
        files = move_store(root, rng)
        before = snapshot(root)
        pid = file_move(s, engine, files)
        nth = run % STEP_COUNTS[step] + 1
        assert _crash_in_child(s, pid, "apply", step, nth) == 77
        after_q = {c["path"]: c["after_sha"] for c in Q.get(engine, pid)["changes"]}
        before_q = {c["path"]: c["before_sha"] for c in Q.get(engine, pid)["changes"]}
        # Straight after the crash: every file is as it was or as proposed, never torn.
        found = {}
        for path in after_q:
            p = root / path
            cur = sha(p.read_bytes()) if p.exists() else None
            assert cur in (before_q[path], after_q[path]), (step, nth, path)
            found[path] = "after" if cur == after_q[path] else "before"
        reports = A.reconcile(s, engine)
        if step == "journal_mark":
            assert reports == [] and status_of(engine, pid) == "applied"
        else:
            assert len(reports) == 1, reports
            rep = reports[0]
            assert rep["id"] == pid and rep["outcome"] == "finished"
            # The queue says which state it found each file in, and it agrees with the disk.
            assert {f["path"]: f["found"] for f in rep["files"]} == found
        # Finished: consistently applied, modes included, no temp files, no open journal.
        assert status_of(engine, pid) == "applied"
        snap = snapshot(root)
        for path, want in after_q.items():
            assert (snap[path][0] if path in snap else None) == want
        assert snap["moved/new name.md"][1] == 0o600 and snap["other.md"] == before["other.md"]
        assert not leftovers(root) and not open_journals(engine)
        # And undo still restores the exact original.
        assert A.undo(s, engine, pid, "t")["ok"]
        assert snapshot(root) == before


@pytest.mark.parametrize("step", CRASH_POINTS)
def test_crash_during_undo_is_settled_too(tmp_path, step):
    s = plain_settings(tmp_path / "home", tmp_path / "stores" / "u0")
    engine = Q.open_queue(s)
    rng = random.Random(f"undo-{step}")
    for run in range(5):
        root = tmp_path / "stores" / f"u{run}"
        s = plain_settings(tmp_path / "home", root)
        files = move_store(root, rng)
        before = snapshot(root)
        pid = file_move(s, engine, files)
        assert A.approve(s, engine, pid, "t")["ok"]
        applied = snapshot(root)
        assert _crash_in_child(s, pid, "undo", step, run % STEP_COUNTS[step] + 1) == 77
        reports = A.reconcile(s, engine)
        assert all(r["outcome"] == "finished" for r in reports)
        assert status_of(engine, pid) == "undone"
        assert snapshot(root) == before and not leftovers(root) and not open_journals(engine)
        assert applied != before


# -- row 7: I/O errors -------------------------------------------------------------------------
class Faulty:
    """Replaces ``os.<name>``: the nth call (and, when ``sticky``, every later one) raises."""

    def __init__(self, name: str, nth: int, err: int, sticky: bool = False):
        self.name, self.nth, self.err, self.sticky = name, nth, err, sticky
        self.real = getattr(os, name)
        self.calls = 0
        self.raised = 0

    def __call__(self, *args, **kw):
        self.calls += 1
        if self.calls == self.nth or (self.sticky and self.calls > self.nth):
            self.raised += 1
            raise OSError(self.err, os.strerror(self.err))
        return self.real(*args, **kw)


def _count_calls(tmp_path, name: str) -> int:
    s = plain_settings(tmp_path / "count-home", tmp_path / "count-store")
    engine = Q.open_queue(s)
    pid = file_move(s, engine, move_store(Path(s.domains["main"]), random.Random(0)))
    A.reconcile(s, engine)  # the reconcile inside approve must not count: it finds nothing to do
    counter = Faulty(name, 10**9, errno.EIO)
    setattr(os, name, counter)
    try:
        assert A.approve(s, engine, pid, "t")["ok"]
    finally:
        setattr(os, name, counter.real)
    engine.dispose()
    return counter.calls


@pytest.mark.parametrize("name", ["fsync", "replace", "write", "fchmod", "open"])
@pytest.mark.parametrize("sticky", [False, True], ids=["once", "from-then-on"])
def test_io_error_at_every_call_keeps_the_original_bytes(tmp_path, monkeypatch, name, sticky):
    k = _count_calls(tmp_path, name)
    assert k >= 2, f"os.{name} was called {k} times in one apply; the injection would test nothing"
    s = plain_settings(tmp_path / "home", tmp_path / "s0")
    engine = Q.open_queue(s)
    for n in range(1, k + 1):
        err = (errno.EIO, errno.ENOSPC)[n % 2]
        root = tmp_path / f"s{n}"
        s = plain_settings(tmp_path / "home", root)
        before = snapshot(root) if root.exists() else None
        files = move_store(root, random.Random(n))
        before = snapshot(root)
        pid = file_move(s, engine, files)
        faulty = Faulty(name, n, err, sticky)
        monkeypatch.setattr(os, name, faulty)
        r = A.approve(s, engine, pid, "t")
        monkeypatch.setattr(os, name, faulty.real)
        assert faulty.raised >= 1
        assert not r["ok"], r
        assert os.strerror(err) in r["message"], r["message"]  # the error is reported
        if sticky:
            # Putting the files back may itself have failed; the next start finishes it.
            A.reconcile(s, engine)
        assert snapshot(root) == before, (name, n, sticky)
        assert status_of(engine, pid) == "pending"
        assert not leftovers(root) and not open_journals(engine)
        outcomes = [a["outcome"] for a in Q.get(engine, pid)["actions"] if a["action"] == "approve"]
        assert outcomes and outcomes[0] == "error"
        # Once the disk behaves, the same proposal applies.
        assert A.approve(s, engine, pid, "t")["ok"] and status_of(engine, pid) == "applied"


# -- row 8: concurrent edits --------------------------------------------------------------------
def _external_edit(p: Path, rng: random.Random, how: str) -> bytes:
    data = p.read_bytes()
    st = p.stat()
    if how == "same-size-same-mtime":
        if not data:
            data = b"x"
            p.write_bytes(data)  # an empty file cannot change at the same size
        else:
            i = rng.randrange(len(data))
            data = data[:i] + bytes([(data[i] + 1 + rng.randrange(255)) % 256]) + data[i + 1 :]
            with open(p, "r+b") as fh:
                fh.write(data)
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif how == "append":
        data = data + b"\nexternal line\n"
        p.write_bytes(data)
    elif how == "truncate":
        data = b""
        p.write_bytes(data)
    elif how == "atomic-replace":
        data = rng.randbytes(len(data) + 1)
        tmp = p.with_name(p.name + ".ext")
        tmp.write_bytes(data)
        os.replace(tmp, p)
    return data


EDITS = ("same-size-same-mtime", "append", "truncate", "atomic-replace")


def test_edits_between_proposal_and_apply_are_refused(queue):
    s, engine, root = queue
    rng = random.Random(8)
    for i in range(200):
        rel = f"n{i}.md"
        write(root, rel, rng.randbytes(rng.randint(0, 200)))
        pid = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", rel, b"agent's version\n")]))
        how = EDITS[i % len(EDITS)]
        external = _external_edit(root / rel, rng, how)
        mtime = (root / rel).stat().st_mtime_ns
        r = A.approve(s, engine, pid, "t")
        assert not r["ok"] and r["status"] == "conflict", (how, r)
        assert rel in r["message"]
        assert (root / rel).read_bytes() == external and (root / rel).stat().st_mtime_ns == mtime
    assert len(Q.list_proposals(engine, status="conflict")) == 200
    assert not leftovers(root)


def test_edit_after_the_first_check_is_caught_by_the_check_before_replace(queue, monkeypatch):
    """The external edit lands after the pre-check, while the temp file is being written: the
    re-hash right before os.replace refuses it, and the file already replaced is put back."""
    s, engine, root = queue
    files = move_store(root, random.Random(3))
    before = snapshot(root)
    pid = file_move(s, engine, files)
    edited = {}

    def hook(step, path):
        if step == "chmod" and path == "index.md" and not edited:
            edited["data"] = _external_edit(root / "index.md", random.Random(4), "same-size-same-mtime")

    monkeypatch.setattr(atomic_put, "after_step", hook)
    r = A.approve(s, engine, pid, "t")
    assert not r["ok"] and r["status"] == "conflict" and "index.md" in r["message"], r
    assert (root / "index.md").read_bytes() == edited["data"]  # the external write survived
    snap = snapshot(root)
    assert "moved/new name.md" not in snap  # the first file, already replaced, was put back
    assert snap["notes/old name.md"] == before["notes/old name.md"]
    assert not leftovers(root) and not open_journals(engine)


def test_conflict_at_filing_time(queue):
    s, engine, root = queue
    write(root, "a.md", b"one\n")
    change = CH.edit_change(s, "main", "a.md", b"two\n")
    (root / "a.md").write_bytes(b"uno\n")
    with pytest.raises(Q.Conflict) as info:
        Q.file_proposal(s, engine, draft("edit", [change]))
    assert info.value.paths == ["a.md"]
    assert Q.list_proposals(engine) == []


def test_reapproving_a_conflict_succeeds_once_the_file_is_back(queue):
    s, engine, root = queue
    write(root, "a.md", b"one\n")
    pid = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "a.md", b"two\n")]))
    (root / "a.md").write_bytes(b"uno\n")
    assert A.approve(s, engine, pid, "t")["status"] == "conflict"
    (root / "a.md").write_bytes(b"one\n")
    assert A.approve(s, engine, pid, "t")["status"] == "applied"
    assert (root / "a.md").read_bytes() == b"two\n"


# -- row 11: undo after a later edit ------------------------------------------------------------
@pytest.mark.parametrize("how", EDITS + ("delete",))
def test_undo_after_a_later_edit_is_refused(queue, how):
    s, engine, root = queue
    files = move_store(root, random.Random(11))
    pid = file_move(s, engine, files)
    assert A.approve(s, engine, pid, "t")["ok"]
    target = root / "moved/new name.md"
    if how == "delete":
        target.unlink()
        later = None
    else:
        later = _external_edit(target, random.Random(12), how)
    snap = snapshot(root)
    r = A.undo(s, engine, pid, "t")
    assert not r["ok"] and "moved/new name.md" in r["message"], r
    assert status_of(engine, pid) == "applied"
    assert snapshot(root) == snap  # nothing changed: the source was not recreated either
    if later is not None:
        assert target.read_bytes() == later
    assert [a["outcome"] for a in Q.get(engine, pid)["actions"]][-1] == "refused"


def test_undo_refused_for_a_proposal_that_is_not_applied(queue):
    s, engine, root = queue
    write(root, "a.md", b"x\n")
    pid = Q.file_proposal(s, engine, draft("edit", [CH.edit_change(s, "main", "a.md", b"y\n")]))
    r = A.undo(s, engine, pid, "t")
    assert not r["ok"] and r["status"] == "pending"
    assert (root / "a.md").read_bytes() == b"x\n"
