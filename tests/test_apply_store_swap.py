"""The store path swapped for another folder mid-apply (issue 22, point 2): the store renamed away
and another folder put at its path, as an unmount or a restore does, on the 22-file archive
proposal of ``tests/archive_store.py``.

Before: every file operation opened the store path again, so the files after the swap (the
archive copy among them, in the reported case) were written into the other folder and the rest
into the real store; ``approve`` said ``applied``, the note was gone from the store and undo was
refused. Now the apply holds the store open (one directory descriptor) and reaches every file
from it; it checks the folder's identity before each file and after the last, and an apply that
cannot finish against the same folder rolls back in that folder and says so. The impostor here
is a restore: a copy of the store as it was, so every hash in it matches and only the folder's
identity tells the two apart.
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


def _swap(store: Path, away: Path, restore: Path) -> None:
    """Rename the store away and put a restored copy of it (made beforehand) at its path."""
    os.rename(store, away)
    os.rename(restore, store)


@pytest.mark.parametrize("at", [0, MIDDLE, archive_store.FILES - 1])
def test_store_swapped_for_a_restore_mid_apply_writes_nothing_into_it_and_rolls_back(world, monkeypatch, tmp_path, at):
    s, engine, store, pid = world
    before = snapshot(store)
    away, restore = tmp_path / "S.real", tmp_path / "restore"
    shutil.copytree(store, restore)
    seen = archive_store.at(monkeypatch, at, lambda: _swap(store, away, restore))
    r = A.approve(s, engine, pid, "t")
    assert not r["ok"] and r["status"] == "pending", r
    assert seen[-1] == at  # stopped at the first file after the swap
    assert "rolled back" in r["message"] and str(away) in r["message"], r["message"]
    assert snapshot(store) == before  # the impostor: nothing written into it, no temp file, no lock
    assert not list(store.rglob(".geode*"))
    assert snapshot(away) == before  # the real store's bytes are whole
    assert not list(away.rglob(".geode*"))
    assert not open_journals(engine) and status_of(engine, pid) == "pending"
    assert [a["outcome"] for a in Q.get(engine, pid)["actions"]] == ["pending", "error"]
    # nothing changed: approving again applies to the folder now at the path, and undo works
    monkeypatch.setattr(A, "before_file", lambda i, n: None)
    assert A.approve(s, engine, pid, "t")["status"] == "applied"
    assert archive_store.states(store, Q.get(engine, pid)) == ["after"] * archive_store.FILES
    assert A.undo(s, engine, pid, "t")["status"] == "undone"
    assert snapshot(store) == before and snapshot(away) == before


def test_store_swapped_for_a_restore_mid_undo_writes_nothing_into_it_and_stays_applied(world, monkeypatch, tmp_path):
    s, engine, store, pid = world
    assert A.approve(s, engine, pid, "t")["ok"]
    applied = snapshot(store)
    away, restore = tmp_path / "S.real", tmp_path / "restore"
    shutil.copytree(store, restore)
    archive_store.at(monkeypatch, MIDDLE, lambda: _swap(store, away, restore))
    r = A.undo(s, engine, pid, "t")
    assert not r["ok"] and r["status"] == "applied" and "rolled back" in r["message"], r
    assert snapshot(store) == applied and snapshot(away) == applied
    assert not open_journals(engine)
    monkeypatch.setattr(A, "before_file", lambda i, n: None)
    assert A.undo(s, engine, pid, "t")["status"] == "undone"  # undo still possible, here


@pytest.mark.slow
def test_a_real_approve_process_with_the_store_swapped_under_it(world, tmp_path):
    """A real ``geode proposals approve`` held at its middle file (``tests/apply_seam.py``'s gate);
    meanwhile this process renames the store away and puts a restored copy at its path."""
    s, engine, store, pid = world
    before = snapshot(store)
    away, restore = tmp_path / "S.real", tmp_path / "restore"
    shutil.copytree(store, restore)
    (tmp_path / "home" / "geode.toml").write_text(f'[domains]\nmain = "{store}"\n')
    gate = tmp_path / "gate"
    env = archive_store.process_env(tmp_path / "home")
    proc = subprocess.Popen(
        apply_seam.command("proposals", "approve", str(pid), "--json", gate=gate),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{gate}.reached").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.005)
        assert archive_store.states(store, Q.get(engine, pid)).count("after") == MIDDLE  # half applied
        _swap(store, away, restore)
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, out + err
    (result,) = json.loads(out)["results"]
    assert not result["ok"] and result["status"] == "pending", result
    assert "rolled back" in result["message"], result
    assert snapshot(store) == before and not list(store.rglob(".geode*"))  # the impostor untouched
    assert snapshot(away) == before and not list(away.rglob(".geode*"))  # the store whole
    assert not open_journals(engine) and status_of(engine, pid) == "pending"
