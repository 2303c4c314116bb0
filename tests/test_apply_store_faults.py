"""A store that is briefly not there, and a folder swapped for a symlink, in the middle of an
apply (issue 15, point 3), on a 22-file archive proposal (``tests/archive_store.py``).

Before: the abort took a missing store for "every file absent", closed the journal as rolled
back with nothing rolled back, ``reconcile`` said "nothing to reconcile" and undo was refused;
with a folder swapped for a symlink, 12 of 22 files stayed applied under status ``failed``. Now
the abort closes the journal only when every file it replaced is provably back; otherwise the
entry stays open and ``reconcile`` finishes it once the store is reachable again, after which
the proposal applies and undoes as usual. Since issue 22 (point 2) the apply holds the store
folder open, so a store moved away is rolled back at once in itself (the two "moved away"
tests; a folder put at its path is ``tests/test_apply_store_swap.py``).

The deterministic tests act at a known file through the apply loop's seam
(``geode.queue.apply.before_file``); one test drives the literal repro with a real ``geode``
process and a real ``mv`` on a timer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from geode.queue import apply as A
from geode.queue import proposals as Q
from tests import apply_seam, archive_store
from tests.stores import snapshot
from tests.test_apply import open_journals, status_of

MIDDLE = archive_store.MIDDLE


@pytest.fixture()
def world(tmp_path):
    with archive_store.world(tmp_path) as w:
        yield w


def _applies_and_undoes(s, engine, store: Path, pid: int, before: dict, monkeypatch) -> None:
    monkeypatch.setattr(A, "before_file", lambda i, n: None)
    r = A.approve(s, engine, pid, "t")
    assert r["ok"] and r["status"] == "applied", r
    assert archive_store.states(store, Q.get(engine, pid)) == ["after"] * archive_store.FILES
    u = A.undo(s, engine, pid, "t")
    assert u["ok"] and u["status"] == "undone", u
    assert snapshot(store) == before and not (store / "archive").exists()


def test_store_moved_away_mid_apply_is_rolled_back_in_the_store_itself(world, monkeypatch):
    """Changed by issue 22 (point 2): the apply holds the store open (one directory descriptor),
    so a store renamed away mid-apply is rolled back at once in the folder itself, wherever it
    is now, and the journal is closed; before, the entry stayed open until the store was back."""
    s, engine, store, pid = world
    before = snapshot(store)
    away = store.with_name("S.away")
    seen = archive_store.at(monkeypatch, MIDDLE, lambda: os.rename(store, away))
    r = A.approve(s, engine, pid, "t")
    assert seen[-1] == MIDDLE  # the fault hit the middle of the apply
    assert not r["ok"] and r["status"] == "pending", r
    assert "went away" in r["message"] and "rolled back" in r["message"], r["message"]
    assert str(away) in r["message"]  # says where the store's folder is now
    assert not open_journals(engine)  # closed: every file is provably back, in the folder itself
    assert snapshot(away) == before  # whole, with no temp file or lock left in it
    assert not store.exists()  # nothing made at the old path
    os.rename(away, store)  # the store is back
    assert A.reconcile(s, engine) == []
    _applies_and_undoes(s, engine, store, pid, before, monkeypatch)


def test_store_moved_away_mid_undo_is_rolled_back_in_the_store_itself(world, monkeypatch):
    """As above for an undo (changed by issue 22, point 2): rolled back at once, still applied."""
    s, engine, store, pid = world
    before = snapshot(store)
    assert A.approve(s, engine, pid, "t")["ok"]
    applied = snapshot(store)
    away = store.with_name("S.away")
    archive_store.at(monkeypatch, MIDDLE, lambda: os.rename(store, away))
    r = A.undo(s, engine, pid, "t")
    assert not r["ok"] and r["status"] == "applied" and "went away" in r["message"], r
    assert "rolled back" in r["message"] and not open_journals(engine)
    assert snapshot(away) == applied
    os.rename(away, store)
    assert A.reconcile(s, engine) == []
    monkeypatch.setattr(A, "before_file", lambda i, n: None)
    assert A.undo(s, engine, pid, "t")["status"] == "undone"
    assert snapshot(store) == before


def test_folder_swapped_for_a_symlink_mid_apply_is_never_closed_half_applied(world, monkeypatch, tmp_path):
    s, engine, store, pid = world
    before = snapshot(store)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def swap() -> None:
        os.rename(store / "team", elsewhere / "team")
        os.symlink(elsewhere / "team", store / "team")

    archive_store.at(monkeypatch, MIDDLE, swap)
    r = A.approve(s, engine, pid, "t")
    assert not r["ok"] and r["status"] == "pending", r  # not `failed` over a half-applied store
    assert "symlink" in r["message"] and "reconcile" in r["message"], r["message"]
    assert len(open_journals(engine)) == 1
    # nothing was written through the symlink
    assert archive_store.states(elsewhere, {"changes": Q.get(engine, pid)["changes"][1:MIDDLE]}) == ["after"] * 10
    (rep,) = A.reconcile(s, engine)  # the folder is still a symlink: left open, said why
    assert rep["outcome"] == "error" and "symlink" in rep["message"], rep
    assert len(open_journals(engine)) == 1
    (store / "team").unlink()  # the folder is put back
    os.rename(elsewhere / "team", store / "team")
    (rep,) = A.reconcile(s, engine)
    assert (rep["outcome"], rep["status"]) == ("rolled_back", "pending"), rep
    assert snapshot(store) == before and not open_journals(engine)
    _applies_and_undoes(s, engine, store, pid, before, monkeypatch)


@pytest.mark.slow
def test_the_literal_repro_with_a_real_process_and_mv(world, tmp_path):
    """``mv store store.away; sleep 0.3; mv store.away store`` half a second into a real ``geode
    proposals approve`` of the 22 files (slowed to ~50 ms a file, so the move lands inside it):
    whatever the approve met, after ``geode proposals reconcile`` the store is all before or all
    after, never mixed, and the proposal applies or undoes from there."""
    s, engine, store, pid = world
    before = snapshot(store)
    (tmp_path / "home" / "geode.toml").write_text(f'[domains]\nmain = "{store}"\n')
    env = archive_store.process_env(tmp_path / "home")

    def geode(*args: str, **kw) -> subprocess.Popen:
        return subprocess.Popen(
            apply_seam.command(*args, "--json", pause=0.05),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            **kw,
        )

    approve = geode("proposals", "approve", str(pid))
    deadline = time.monotonic() + 60
    while not list(store.rglob(".geode-store.lock")):  # the apply has begun
        assert approve.poll() is None and time.monotonic() < deadline, approve.communicate()
        time.sleep(0.005)
    time.sleep(0.5)
    away = store.with_name("S.away")
    os.rename(store, away)
    time.sleep(0.3)
    os.rename(away, store)
    out, err = approve.communicate(timeout=120)
    (result,) = json.loads(out)["results"]
    assert not result["ok"] and result["status"] == "pending", result  # the move hit the apply (22 x 50 ms)
    rec = geode("proposals", "reconcile")
    rout, rerr = rec.communicate(timeout=120)
    assert rec.returncode == 0, rout + rerr
    states = archive_store.states(store, Q.get(engine, pid))
    assert states in (["before"] * archive_store.FILES, ["after"] * archive_store.FILES), (result, states)
    assert not open_journals(engine)
    if states[0] == "after":
        assert status_of(engine, pid) == "applied"
        assert A.undo(s, engine, pid, "t")["status"] == "undone"
    else:
        assert status_of(engine, pid) == "pending"
        assert A.approve(s, engine, pid, "t")["status"] == "applied"
        assert A.undo(s, engine, pid, "t")["status"] == "undone"
    assert snapshot(store) == before
    shutil.rmtree(tmp_path / "home", ignore_errors=True)
