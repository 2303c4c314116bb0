"""The ledger writer, its spool and drain, and the record tables (SQLite files and PostgreSQL).

Real files in tmp_path, real sqlite3 connections; PostgreSQL must be reachable at
127.0.0.1:5432 (trust auth): when it is not, these tests fail rather than skip, because a
ledger backend nobody tests is a backend that silently loses rows.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from geode.delivery import ledger
from geode.records import models
from tests.stores import plain_settings


def db_rows(settings) -> list[tuple]:
    conn = sqlite3.connect(str(settings.records_file))
    try:
        return conn.execute("SELECT event_id, kind, session, crystal_id, detail FROM ledger_event").fetchall()
    finally:
        conn.close()


def spool_lines(settings) -> list[bytes]:
    path = ledger.spool_path(settings)
    if not os.path.exists(path):
        return []
    with open(path, "rb") as fh:
        return fh.read().splitlines(keepends=True)


def test_columns_match_the_sqlmodel_table():
    assert ledger.COLUMNS == tuple(c.name for c in models.LedgerEvent.__table__.columns)
    assert models.LedgerEvent.__table__.c.event_id.unique
    indexed = {tuple(c.name for c in ix.columns) for ix in models.LedgerEvent.__table__.indexes}
    assert {("kind",), ("session",), ("crystal_id",), ("ts",)} <= indexed


def test_new_event_fills_every_column_and_rejects_unknown_fields():
    ev = ledger.new_event("delivered", session="s1", crystal_id="main:a", detail={"why": ["x"]}, truncated=True)
    assert set(ev) == set(ledger.EVENT_FIELDS)
    assert len(ev["event_id"]) == 32 and int(ev["event_id"], 16) >= 0
    assert json.loads(ev["detail"]) == {"why": ["x"]}
    assert ev["truncated"] == 1 and ev["chars"] == 0 and ev["path"] == ""
    assert ledger.new_event("delivered")["event_id"] != ev["event_id"]
    with pytest.raises(TypeError):
        ledger.new_event("delivered", crystal="oops")


def test_append_without_a_database_spools_and_creates_no_db_file(tmp_path):
    s = plain_settings(tmp_path)
    evs = [ledger.new_event("delivered", session="s", crystal_id=f"main:{i}") for i in range(3)]
    assert ledger.append(s, evs) == "spool"
    assert not os.path.exists(s.records_file)
    lines = spool_lines(s)
    assert [json.loads(line)["event_id"] for line in lines] == [e["event_id"] for e in evs]


def test_append_writes_to_the_database_once_it_exists(tmp_path):
    s = plain_settings(tmp_path)
    models.init_db(s).dispose()
    ev = ledger.new_event("delivered", session="s", crystal_id="main:a")
    assert ledger.append(s, [ev]) == "db"
    assert db_rows(s) == [(ev["event_id"], "delivered", "s", "main:a", "")]
    assert spool_lines(s) == []


def test_append_to_a_db_file_without_the_table_spools(tmp_path):
    s = plain_settings(tmp_path)
    sqlite3.connect(s.records_file).close()  # an empty database file, no table yet
    assert ledger.append(s, [ledger.new_event("blocked", session="s")]) == "spool"
    assert len(spool_lines(s)) == 1


def test_append_to_a_corrupt_db_file_spools(tmp_path):
    s = plain_settings(tmp_path)
    with open(s.records_file, "wb") as fh:
        fh.write(b"this is not a database" * 100)
    assert ledger.append(s, [ledger.new_event("blocked", session="s")]) == "spool"
    assert len(spool_lines(s)) == 1


def test_postgresql_ledger_always_spools_from_the_hook(tmp_path):
    # Port 9 on localhost: if the hook tried to connect, it would fail, not spool quietly.
    s = plain_settings(tmp_path, database_url="postgresql://nobody@127.0.0.1:9/none")
    assert ledger.append(s, [ledger.new_event("delivered", session="s")]) == "spool"
    assert len(spool_lines(s)) == 1


def test_append_raises_only_when_database_and_spool_both_fail(tmp_path):
    s = plain_settings(tmp_path)
    with open(os.path.join(str(tmp_path), "spool"), "w") as fh:
        fh.write("a file where the spool folder should be")
    with pytest.raises(OSError):
        ledger.append(s, [ledger.new_event("delivered")])


def test_oversized_detail_is_cut_to_one_parseable_line_under_4k(tmp_path):
    s = plain_settings(tmp_path)
    ev = ledger.new_event("delivered", session="s", detail={"text": "é" * 20000}, path="p" * 9000)
    assert ledger.append(s, [ev]) == "spool"
    (line,) = spool_lines(s)
    assert len(line) < 4096
    obj = json.loads(line)
    assert obj["event_id"] == ev["event_id"]
    assert json.loads(obj["detail"])["detail_truncated"] is True
    assert obj["path"].endswith("[cut]")


def test_drain_moves_spooled_events_into_the_database_once(tmp_path):
    s = plain_settings(tmp_path)
    evs = [ledger.new_event("delivered", session="s", crystal_id=f"main:{i}") for i in range(50)]
    assert ledger.append(s, evs) == "spool"
    models.init_db(s, drain=False).dispose()
    assert ledger.drain_spool(s) == 50
    assert sorted(r[0] for r in db_rows(s)) == sorted(e["event_id"] for e in evs)
    assert not os.path.exists(ledger.spool_path(s)) or spool_lines(s) == []
    # the same lines spooled again (a re-ingest) change nothing
    ledger.spool_append(s, evs)
    assert ledger.drain_spool_report(s) == {"ingested": 50, "new": 0, "rejected": 0, "files": 1}
    assert len(db_rows(s)) == 50


def test_a_successful_db_write_drains_the_spool(tmp_path):
    s = plain_settings(tmp_path)
    early = [ledger.new_event("delivered", session="s") for _ in range(5)]
    assert ledger.append(s, early) == "spool"
    models.init_db(s, drain=False).dispose()
    late = ledger.new_event("delivered", session="s")
    assert ledger.append(s, [late]) == "db"
    assert sorted(r[0] for r in db_rows(s)) == sorted(e["event_id"] for e in early + [late])
    assert ledger.pending_count(s) == 0


def test_torn_and_malformed_lines_go_to_rejected_not_nowhere(tmp_path):
    s = plain_settings(tmp_path)
    good = [ledger.new_event("delivered", session="s") for _ in range(3)]
    ledger.spool_append(s, good[:2])
    with open(ledger.spool_path(s), "ab") as fh:
        fh.write(b'{"event_id": "nothex", "kind": "delivered"}\n')  # parses, but no valid id
        fh.write(b"[1, 2]\n")
    ledger.spool_append(s, good[2:])
    with open(ledger.spool_path(s), "ab") as fh:
        fh.write(b'{"event_id": "' + b"a" * 32 + b'", "kind": "deliv')  # torn: no newline
    models.init_db(s, drain=False).dispose()
    report = ledger.drain_spool_report(s)
    assert report["ingested"] == 3 and report["rejected"] == 3
    assert sorted(r[0] for r in db_rows(s)) == sorted(e["event_id"] for e in good)
    with open(os.path.join(str(s.spool_dir), ledger.REJECTED_NAME), "rb") as fh:
        rejected = fh.read().splitlines()
    assert rejected[0] == b'{"event_id": "nothex", "kind": "delivered"}'
    assert rejected[2].startswith(b'{"event_id": "aaaa')
    assert ledger.rejected_count(s) == 3


def test_init_db_announces_rejected_lines_on_stderr(tmp_path, capsys):
    s = plain_settings(tmp_path)
    os.makedirs(s.spool_dir)
    with open(ledger.spool_path(s), "wb") as fh:
        fh.write(b"garbage\n")
    models.init_db(s).dispose()
    err = capsys.readouterr().err
    assert "1 unreadable ledger spool line(s)" in err and "rejected.jsonl" in err


def test_a_draining_file_left_by_a_crashed_drain_is_ingested_once(tmp_path):
    """The crash came after the commit and before the delete: half the rows are in already."""
    s = plain_settings(tmp_path)
    engine = models.init_db(s)
    evs = [ledger.new_event("delivered", session="crash", crystal_id=f"main:{i}") for i in range(20)]
    models.insert_events(engine, evs[:10])
    os.makedirs(s.spool_dir, exist_ok=True)
    leftover = os.path.join(s.spool_dir, "events.99999.deadbeef.draining")
    with open(leftover, "wb") as fh:
        fh.write(b"".join(ledger.encode_line(e) for e in evs))
    # a crashed drainer held no lock (locks die with their process), so this is claimable
    report = ledger.drain_spool_report(s)
    assert report == {"ingested": 20, "new": 10, "rejected": 0, "files": 1}
    assert not os.path.exists(leftover)
    ids = [r[0] for r in db_rows(s)]
    assert sorted(ids) == sorted(e["event_id"] for e in evs) and len(ids) == len(set(ids)) == 20
    assert ledger.drain_spool(s) == 0
    engine.dispose()


def test_a_draining_file_held_by_a_live_drainer_is_left_alone(tmp_path):
    s = plain_settings(tmp_path)
    models.init_db(s).dispose()
    os.makedirs(s.spool_dir, exist_ok=True)
    busy = os.path.join(s.spool_dir, "events.1.live.draining")
    with open(busy, "wb") as fh:
        fh.write(ledger.encode_line(ledger.new_event("delivered", session="s")))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import fcntl, os, sys
            fd = os.open({busy!r}, os.O_RDWR); fcntl.flock(fd, fcntl.LOCK_EX)
            print("locked", flush=True); sys.stdin.readline()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        report = ledger.drain(s, lambda evs: pytest.fail("ingested a file another drainer holds"), claim_wait_s=0.05)
        assert report["files"] == 0 and os.path.exists(busy)
    finally:
        holder.communicate("go\n")
    assert ledger.drain_spool(s) == 1 and not os.path.exists(busy)


def test_init_db_is_idempotent_and_records_the_plan_once(tmp_path):
    s = plain_settings(tmp_path, withhold_rate=0.1, stop_units=100, stop_date="2026-12-17")
    models.init_db(s).dispose()
    first = models.read_plan(models.engine_for(s))
    assert first["rate"] == 0.1 and first["stop_units"] == 100 and first["stop_date"] == "2026-12-17"
    assert len(first["salt"]) == 32  # random when none is configured
    later = plain_settings(tmp_path, withhold_rate=0.5, stop_units=7, control_salt="chosen-later")
    engine = models.init_db(later)
    assert models.read_plan(engine) == first
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM control_plan").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    engine.dispose()


def test_engine_transactions_begin_immediate(tmp_path):
    """A deferred BEGIN would take no lock until the first write; IMMEDIATE takes it at once."""
    s = plain_settings(tmp_path)
    engine = models.init_db(s)
    other = sqlite3.connect(s.records_file, timeout=0, isolation_level=None)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("SELECT COUNT(*) FROM ledger_event").scalar()  # a read only
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        other.execute("BEGIN IMMEDIATE")  # released after the SQLAlchemy transaction ends
        other.execute("ROLLBACK")
    finally:
        other.close()
        engine.dispose()


@pytest.mark.services
def test_postgresql_init_db_and_spool_drain(tmp_path, pg_url):
    s = plain_settings(tmp_path, database_url=pg_url, withhold_rate=0.2, stop_units=50)
    evs = [ledger.new_event("delivered", session="pg", crystal_id=f"main:{i}", detail={"i": i}) for i in range(30)]
    assert ledger.append(s, evs) == "spool"
    with open(ledger.spool_path(s), "ab") as fh:
        fh.write(b"torn line without end")
    engine = models.init_db(s)
    try:
        assert engine.dialect.name == "postgresql"
        with engine.connect() as conn:
            got = conn.exec_driver_sql("SELECT event_id, detail FROM ledger_event ORDER BY id").all()
        assert sorted(r[0] for r in got) == sorted(e["event_id"] for e in evs)
        assert {json.loads(r[1])["i"] for r in got} == set(range(30))
        assert ledger.rejected_count(s) == 1
        assert ledger.pending_count(s) == 0
        plan = models.read_plan(engine)
        assert plan["rate"] == 0.2 and plan["stop_units"] == 50
        # the same events spooled again: ON CONFLICT DO NOTHING, no duplicates
        ledger.spool_append(s, evs)
        assert models.ingest_spool_into(engine, s) == {"ingested": 30, "new": 0, "rejected": 0, "files": 1}
        fresh = [ledger.new_event("blocked", session="pg") for _ in range(3)]
        ledger.spool_append(s, evs[:2] + fresh)
        assert models.ingest_spool_into(engine, s) == {"ingested": 5, "new": 3, "rejected": 0, "files": 1}
        models.init_db(s).dispose()  # idempotent on PostgreSQL too
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT COUNT(*), COUNT(DISTINCT event_id) FROM ledger_event").one() == (33, 33)
            assert conn.exec_driver_sql("SELECT COUNT(*) FROM control_plan").scalar() == 1
    finally:
        engine.dispose()


def test_init_db_survives_a_drain_that_fails_and_keeps_the_lines(tmp_path, capsys, monkeypatch):
    s = plain_settings(tmp_path)
    evs = [ledger.new_event("delivered", session="s") for _ in range(4)]
    ledger.spool_append(s, evs)

    def broken(conn, events):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(models, "_insert_events", broken)
    models.init_db(s).dispose()
    assert "not drained this time" in capsys.readouterr().err
    assert ledger.pending_count(s) == 4
    monkeypatch.undo()
    models.init_db(s).dispose()
    assert sorted(r[0] for r in db_rows(s)) == sorted(e["event_id"] for e in evs)
