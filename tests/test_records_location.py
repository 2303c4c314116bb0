"""One answer to "where are the records", the hook included.

The bug this guards: with ``GEODE_DATABASE_URL`` pointing elsewhere and an old
``GEODE_HOME/geode.db`` beside it, the hook wrote its deliveries into ``geode.db`` and read the
control arm's plan from there, while ``geode stats`` read the configured database and saw
nothing. Here the real hook command runs against real files, and both files are read back.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from geode.kernel.config import records_file
from tests.helpers import REPO, Geode
from tests.stores import NO_BACKGROUND_BUILD

PIPE = "A pipe into tail hides the exit code of the build: use set -o pipefail."


def _rows(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT kind, session FROM ledger_event ORDER BY id").fetchall()


def _plan_rate(db: Path) -> float:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT rate FROM control_plan").fetchone()[0]


def _stats(g: Geode, url: str) -> dict:
    env = g.env(None, GEODE_DATABASE_URL=url, PYTHONPATH=str(REPO)) | NO_BACKGROUND_BUILD
    proc = subprocess.run(
        [sys.executable, "-m", "geode", "stats", "--json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_hook_writes_and_reads_the_configured_database_not_a_stale_geode_db(tmp_path):
    g = Geode(tmp_path)
    g.crystal("pipe.md", PIPE, name="exit-code-through-a-pipe", match="| tail, |tail, | head")
    stale = g.home / "geode.db"
    elsewhere = tmp_path / "x" / "elsewhere.db"
    elsewhere.parent.mkdir()
    url = f"sqlite:///{elsewhere}"  # an absolute path: sqlite:////tmp/.../elsewhere.db
    assert url.startswith("sqlite:////")

    # The stale file: a plan that never withholds. The configured one: a plan that always does.
    from geode.kernel.config import load_settings
    from geode.records.models import init_db

    init_db(load_settings(env=g.env("0"))).dispose()
    init_db(load_settings(env=g.env("1", GEODE_DATABASE_URL=url))).dispose()
    assert _plan_rate(stale) == 0.0 and _plan_rate(elsewhere) == 1.0
    stale_before = (stale.stat().st_mtime_ns, stale.stat().st_size, _rows(stale))
    assert stale_before[2] == []

    # A delivery (the rate pinned to 0 by the environment) lands in elsewhere.db.
    res = g.bash("npm run build | tail -20", session="s1", env_extra={"GEODE_DATABASE_URL": url})
    assert res.rc == 0 and res.errors == "", res
    assert PIPE in res.context
    assert _rows(elsewhere) == [("delivered", "s1")]
    assert _stats(g, url)["deliveries"] == 1

    # The control arm's plan comes from elsewhere.db (rate 1: withheld), not geode.db (rate 0).
    res = g.bash("npm run build | tail -20", session="s2", withhold=None, env_extra={"GEODE_DATABASE_URL": url})
    assert res.rc == 0 and res.errors == "", res
    assert PIPE not in res.stdout
    assert ("withheld", "s2") in _rows(elsewhere)
    assert not os.path.exists(g.home / "spool" / "events.jsonl") or not (g.home / "spool" / "events.jsonl").read_text()

    # The stale file was never written, and stats on it (no URL) sees nothing.
    assert (stale.stat().st_mtime_ns, stale.stat().st_size, _rows(stale)) == stale_before
    assert not os.path.exists(str(stale) + "-wal") or os.path.getsize(str(stale) + "-wal") == 0


def test_with_postgresql_configured_the_hook_spools_and_leaves_a_stale_geode_db_alone(tmp_path):
    """The hook never opens a network connection: with the records in PostgreSQL its events go
    to the spool (drained by the next CLI command), whatever SQLite file lies in GEODE_HOME."""
    g = Geode(tmp_path)
    g.crystal("pipe.md", PIPE, name="exit-code-through-a-pipe", match="| tail, |tail, | head")
    g.init_db()
    stale = g.home / "geode.db"
    res = g.bash("npm run build | tail -20", env_extra={"GEODE_DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"})
    assert res.rc == 0 and res.errors == "", res
    assert PIPE in res.context
    assert _rows(stale) == []
    spooled = [json.loads(line) for line in (g.home / "spool" / "events.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["session"]) for e in spooled] == [("delivered", "s1")]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (None, "/h/geode.db"),
        ("sqlite:////tmp/x/elsewhere.db", "/tmp/x/elsewhere.db"),
        ("sqlite:///relative/r.db", "relative/r.db"),  # relative to the working directory, as SQLAlchemy
        ("sqlite+pysqlite:////tmp/p.db", "/tmp/p.db"),
        ("sqlite:////tmp/a%20b.db?timeout=3", "/tmp/a b.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:x.db?uri=true", None),
        ("postgresql://u@127.0.0.1/test", None),
        ("postgresql+psycopg://u@127.0.0.1/test", None),
    ],
)
def test_records_file_reads_a_url_as_sqlalchemy_does(url, expected):
    assert records_file(url, "/h") == expected
    if expected is not None and url is not None:
        from sqlalchemy.engine import make_url

        assert make_url(url).database == expected
