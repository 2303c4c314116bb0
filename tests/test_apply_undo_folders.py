"""Undoing an archive (or any move into a new folder) removes the folders its apply made, once
they are empty again (issue 15, point 6); a folder that was there before, or that someone filled
since, stays. Real files, a real SQLite queue."""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.queue import apply as A
from geode.queue import changes as CH
from geode.queue import proposals as Q
from tests.stores import plain_settings, snapshot, write
from tests.test_apply import draft


@pytest.fixture()
def queue(tmp_path):
    s = plain_settings(tmp_path / "home", tmp_path / "store")
    engine = Q.open_queue(s)
    yield s, engine, Path(s.domains["main"])
    engine.dispose()


def _archive(s, engine, rel: str) -> int:
    pid = Q.file_proposal(s, engine, draft("archive", CH.archive_changes(s, "main", rel), agent="cleaner"))
    assert pid is not None
    return pid


def test_undoing_an_archive_removes_the_folders_it_made(queue):
    s, engine, root = queue
    write(root, "team/deep/old.md", "---\nname: old\ndescription: an old note\n---\nbody\n")
    write(root, "index.md", "# index\n")
    before = snapshot(root)
    pid = _archive(s, engine, "team/deep/old.md")
    assert A.approve(s, engine, pid, "t")["status"] == "applied"
    assert (root / "archive/team/deep/old.md").is_file() and not (root / "team/deep/old.md").exists()
    assert A.undo(s, engine, pid, "t")["status"] == "undone"
    assert snapshot(root) == before
    assert not (root / "archive").exists()  # archive/, archive/team/, archive/team/deep/: all made by the apply
    assert (root / "team/deep").is_dir()  # the source's folder was there before: kept


def test_undo_keeps_a_folder_that_was_there_or_was_filled_since(queue):
    s, engine, root = queue
    write(root, "a.md", "---\nname: a\ndescription: a note\n---\nbody\n")
    write(root, "team/b.md", "---\nname: b\ndescription: b note\n---\nbody\n")
    write(root, "archive/keep.md", "kept\n")  # archive/ was there before
    pa, pb = _archive(s, engine, "a.md"), _archive(s, engine, "team/b.md")
    assert A.approve(s, engine, pa, "t")["ok"] and A.approve(s, engine, pb, "t")["ok"]
    write(root, "archive/team/mine.md", "written by a person after the apply\n")
    assert A.undo(s, engine, pa, "t")["ok"] and A.undo(s, engine, pb, "t")["ok"]
    assert (root / "archive/keep.md").read_text() == "kept\n"
    assert (root / "archive/team/mine.md").is_file()  # archive/team/ was made by pb, but is not empty
    assert not (root / "archive/a.md").exists() and not (root / "archive/team/b.md").exists()


def test_reconcile_finishing_an_interrupted_undo_removes_the_folders_too(queue):
    """An undo killed after its last file (before its journal was marked): the reconcile that
    finishes it removes the archive folders, as the undo itself would have."""
    from tests.test_apply import _crash_in_child

    s, engine, root = queue
    write(root, "team/deep/old.md", "---\nname: old\ndescription: an old note\n---\nbody\n")
    before = snapshot(root)
    pid = _archive(s, engine, "team/deep/old.md")
    assert A.approve(s, engine, pid, "t")["ok"]
    assert _crash_in_child(s, pid, "undo", "dir_fsync", 2) == 77  # both files back, journal open
    (report,) = A.reconcile(s, engine)
    assert (report["outcome"], report["status"]) == ("finished", "undone"), report
    assert snapshot(root) == before
    assert not (root / "archive").exists()


def test_a_rolled_back_apply_removes_the_folders_it_made(queue):
    """An apply killed after the archived copy was written (the source not yet removed): the
    reconcile that rolls it back removes the archive folders that copy needed."""
    from tests.test_apply import _crash_in_child

    s, engine, root = queue
    write(root, "team/deep/old.md", "---\nname: old\ndescription: an old note\n---\nbody\n")
    before = snapshot(root)
    pid = _archive(s, engine, "team/deep/old.md")
    assert _crash_in_child(s, pid, "apply", "dir_fsync", 1) == 77
    from geode.queue import tables as queue_tables

    J = queue_tables.ProposalJournal.__table__
    with engine.begin() as conn:
        conn.execute(J.update().values(direction="back"))  # as an abort that was itself cut short
    (report,) = A.reconcile(s, engine)
    assert (report["outcome"], report["status"]) == ("rolled_back", "pending"), report
    assert snapshot(root) == before
    assert not (root / "archive").exists()
