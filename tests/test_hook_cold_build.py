"""The first build of a large binding index happens off the hook (issue 22, item 11).

What broke: on a cold index the first hook call built it inline (32 s at 100,000 notes); the
agent kills a hook at 10 s, the killed build kept nothing, and nothing was delivered until
``geode reindex``. Now a store above ``hook_build_files`` note files is built by a detached
builder the hook starts; the hook answers nothing (an ``index_building`` row) until the index
exists; a builder killed with SIGKILL leaves no index that looks whole and the next call starts
another; doctor says "index building" while one runs.

Real parts: the installed hook command, a real store of a few thousand files (the threshold is
set low in the home's geode.toml rather than writing 100,000), the real detached builder, a real
SIGKILL, and a real process holding the builder's lock for doctor.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from tests.helpers import Geode, crystal_text

NOTES = 8000
CONFIG = "[delivery]\nhook_build_files = 50\n"


def _big_store(g: Geode, notes: int = NOTES) -> None:
    g.crystal("build.md", "Run the build with --verbose to see the failing step.", match='"npm run build"')
    for i in range(notes):
        d = g.store / f"area{i // 200}"
        if i % 200 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"n{i}.md").write_text(
            crystal_text(f"note {i} on the tool number {i}", name=f"n{i}", match=f'"tool{i} run"'),
            encoding="utf-8",
        )
    g.init_db()


def _index(g: Geode):
    from geode.delivery.index import Index

    return Index(g.settings(), busy_ms=100)


def _built(g: Geode) -> bool:
    idx = _index(g)
    try:
        return idx.is_built()
    except sqlite3.Error:
        return False
    finally:
        idx.conn.close()


def _builder(g: Geode, wait_s: float = 30.0) -> dict | None:
    from geode.delivery.index_build import running

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        info = running(_index_file(g))
        if info is not None and info.get("pid"):
            return info
        if _built(g):
            return None
        time.sleep(0.02)
    return None


def _index_file(g: Geode) -> str:
    from geode.delivery.index import index_path

    return index_path(g.settings())


def _wait_built(g: Geode, wait_s: float = 300.0) -> None:
    from geode.delivery.index_build import running

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if running(_index_file(g)) is None and _built(g):
            return
        time.sleep(0.1)
    raise AssertionError(f"the background build did not finish in {wait_s} s: {_log(g)}")


def _log(g: Geode) -> str:
    p = g.home / "index-build.log"
    return p.read_text(errors="replace")[-2000:] if p.exists() else "(no index-build.log)"


def _gone(pid: int, wait_s: float = 10.0) -> None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)
    raise AssertionError(f"process {pid} did not exit")


@pytest.mark.slow
def test_first_call_on_a_large_cold_store_starts_a_background_build_and_a_later_call_delivers(tmp_path):
    g = Geode(tmp_path, config=CONFIG)
    _big_store(g)
    first = g.bash("npm run build", session="first")
    assert first.rc == 0 and first.stdout == "", first
    rows = g.rows("index_building")
    assert [r["session"] for r in rows] == ["first"], (g.rows(), first.errors)
    assert json.loads(rows[0]["detail"])["state"] == "started"
    _wait_built(g)
    later = g.bash("npm run build", session="later")
    assert "--verbose" in later.context, (later, _log(g))
    assert g.rows("delivered", session="later")
    assert g.error_log() == ""


@pytest.mark.slow
def test_a_builder_killed_mid_way_leaves_no_whole_looking_index_and_the_next_call_restarts_it(tmp_path):
    g = Geode(tmp_path, config=CONFIG)
    _big_store(g)
    assert g.bash("npm run build", session="first").stdout == ""
    info = _builder(g)
    assert info is not None, f"no builder was seen running: {_log(g)}"
    time.sleep(0.3)  # into the scan
    os.kill(info["pid"], signal.SIGKILL)
    _gone(info["pid"])
    assert not _built(g), "the build finished before it could be killed: the store is too small for this test"
    conn = sqlite3.connect(_index_file(g))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    again = g.bash("npm run build", session="again")  # the lock died with the builder: a new one starts
    assert again.stdout == "", again
    row = g.rows("index_building", session="again")
    assert row and json.loads(row[0]["detail"])["state"] == "started", g.rows()
    _wait_built(g)
    after = g.bash("npm run build", session="after")
    assert "--verbose" in after.context, (after, _log(g))
    idx = _index(g)
    try:
        assert idx.counts()["files"] == NOTES + 1
    finally:
        idx.close()


_HOLD_LOCK = textwrap.dedent(
    """
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, f"{os.getpid()} {time.time()!r}\\n".encode())
    print("ready", flush=True)
    sys.stdin.read()
    """
)


def test_doctor_says_index_building_while_a_builder_runs_and_the_hook_stays_quiet(tmp_path):
    from geode.delivery.index_build import lock_path
    from geode.services import doctor, doctor_index_build

    def index_part():  # the line of doctor_checks that says the index's state (its other checks need services)
        building = doctor_index_build.building(g.settings())
        return [doctor.check("index", *building)] if building else doctor.index_checks(g.settings(), 1)

    g = Geode(tmp_path, config=CONFIG)
    g.crystal("build.md", "Run the build with --verbose to see the failing step.", match='"npm run build"')
    g.init_db()
    path = _index_file(g)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, lock_path(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        index = index_part()
        assert len(index) == 1 and index[0]["ok"] is False, index
        assert "index building" in index[0]["message"], index
        assert index[0]["examined"]["pid"] == holder.pid
        quiet = g.bash("npm run build", session="during")  # a small store too: a build is already running
        assert quiet.rc == 0 and quiet.stdout == "", quiet
        assert json.loads(g.rows("index_building", session="during")[0]["detail"])["state"] == "running"
    finally:
        holder.communicate("", timeout=30)
    checks = index_part()
    assert [c["ok"] for c in checks if c["name"] == "index"] == [True], checks
    assert "--verbose" in g.bash("npm run build", session="after").context
