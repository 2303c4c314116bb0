"""The records' SQLAlchemy engine: SQLite (WAL, busy timeout, BEGIN IMMEDIATE) or PostgreSQL.

Apart from ``geode.records.models`` (which re-exports it) because that module imports SQLModel,
about 0.2 s at a command's start: the recall index opens its database through ``engine_for``
too, and ``geode search`` must not pay for SQLModel. Every SQLite transaction opened here begins
with ``BEGIN IMMEDIATE`` (why: ``geode.records.models``).
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

#: The CLI waits longer than the hook for the SQLite write lock: it has a person, not a tool
#: call, waiting on it.
CLI_BUSY_TIMEOUT_MS = 10_000


def sqlalchemy_url(url: str) -> str:
    """Plain ``postgresql://`` means psycopg2 to SQLAlchemy; geode depends on psycopg 3."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def engine_for(settings) -> Engine:
    """The engine for the records: SQLite (WAL, busy timeout, BEGIN IMMEDIATE) or PostgreSQL."""
    if not settings.uses_sqlite_ledger:
        return create_engine(sqlalchemy_url(str(settings.database_url)), pool_pre_ping=True)
    if not settings.database_url:
        os.makedirs(str(settings.home), exist_ok=True)  # the default file, GEODE_HOME/geode.db
    engine = create_engine(settings.db_url, connect_args={"timeout": CLI_BUSY_TIMEOUT_MS / 1000.0})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves: pysqlite would otherwise start deferred transactions.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {CLI_BUSY_TIMEOUT_MS}")
            set_wal(cur)
            cur.execute("PRAGMA synchronous = NORMAL")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def set_wal(cur: Any) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out another process that holds the database.

    Why a loop: switching a rollback-journal database to WAL needs an exclusive lock, and SQLite
    answers ``database is locked`` at once, without the busy handler, while another process is
    creating the same new database (seen with four processes starting on one fresh home). Once
    the file is in WAL mode the pragma is a read and never waits."""
    import sqlite3
    import time

    deadline = time.monotonic() + CLI_BUSY_TIMEOUT_MS / 1000.0
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
