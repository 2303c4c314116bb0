"""Issue 25: the binding index's per-session table is pruned off the hook's path (the nightly
upkeep, ``geode reindex``): an aged home of 50,000 sessions keeps only the recent ones, and
what a live session was told (deny-once, once per session) still holds after the prune."""

from __future__ import annotations

import sqlite3
import time

from geode.agents.upkeep import prune_hook_sessions
from geode.delivery.index import SESS_KEEP_MAX, SESS_KEEP_S, Index, index_path
from tests.helpers import Geode

AGED = 50_000


def _sessions(db: str) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT DISTINCT session FROM sess")}
    finally:
        conn.close()


def _age(db: str, n: int, ts: float, prefix: str) -> None:
    """``n`` sessions of history as the hook leaves them (a start mark, action counts, a delivery)."""
    conn = sqlite3.connect(db)
    try:
        rows = []
        for i in range(n):
            s = f"{prefix}-{i:06d}"
            rows += [(s, "start", "t", ts, 0), (s, "actions", "bash", ts, 3), (s, "delivered", "main:a.md", ts, 0)]
        conn.executemany("INSERT INTO sess(session, kind, item, ts, n) VALUES(?,?,?,?,?)", rows)
        conn.commit()
    finally:
        conn.close()


def test_an_aged_home_is_pruned_and_a_live_session_keeps_its_state(tmp_path):
    g = Geode(tmp_path, config='[delivery]\nact_mode = "deny-once"\n')
    g.crystal("a.md", "Deploy with the staging flag first.", name="deploy-note", match="deploy")
    g.init_db()
    first = g.bash("./deploy.sh", session="live")
    assert "permissionDecision" in first.stdout  # held once for this session
    db = index_path(g.settings())
    _age(db, AGED, time.time() - SESS_KEEP_S - 86400, "old")
    assert len(_sessions(db)) == AGED + 1
    dropped = prune_hook_sessions(g.settings())  # what the nightly upkeep runs
    assert dropped == AGED
    assert _sessions(db) == {"live"}
    again = g.bash("./deploy.sh", session="live")
    assert again.rc == 0 and again.stdout == "", "the live session lost its deny-once state"
    other = g.bash("./deploy.sh", session="new")
    assert "permissionDecision" in other.stdout  # a new session is still held once


def test_the_cap_keeps_the_newest_sessions(tmp_path):
    g = Geode(tmp_path)
    g.crystal("a.md", "Deploy note.", name="deploy-note", match="deploy")
    g.init_db()
    g.bash("./deploy.sh", session="live")
    db = index_path(g.settings())
    now = time.time()
    _age(db, SESS_KEEP_MAX + 500, now - 3600, "recent")  # inside the window, but past the cap
    idx = Index(g.settings(), busy_ms=2000)
    try:
        assert idx.prune_sessions(now=now) == 501  # the 501 past the cap; the live session is the newest and stays
    finally:
        idx.close()
    left = _sessions(db)
    assert len(left) == SESS_KEEP_MAX and "live" in left
