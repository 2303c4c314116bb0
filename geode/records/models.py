"""SQLModel tables for the records that cannot be rebuilt (CLI side; the hook never imports this).

Why here and not in ``ledger.py``: the hook must start in milliseconds and may import only the
standard library, so it writes rows by column name (``ledger.COLUMNS``). The table itself is
defined once, here; a test asserts the two agree.

Every SQLite transaction opened through ``engine_for`` begins with ``BEGIN IMMEDIATE``: a
deferred transaction that reads and then writes fails at once with SQLITE_BUSY (or
SQLITE_BUSY_SNAPSHOT) whatever the busy timeout, while the hooks are writing next to us.
"""

from __future__ import annotations

import os
import sys
import time

from sqlalchemy import Column, Float, Index, Insert, Integer, String, Table, Text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, col, select

from geode.delivery import ledger
from geode.records import migrations

# The engine itself lives in ``geode.records.sql_engines`` (SQLAlchemy only, no SQLModel), so the
# recall index can open its database without importing SQLModel (~0.2 s at a CLI's start).
from geode.records.sql_engines import (  # noqa: F401 - re-exported: the records engine
    CLI_BUSY_TIMEOUT_MS,
    engine_for,
)


class LedgerEvent(SQLModel, table=True):
    """One ledger event (delivery, withholding, blocked lookup, ...). See docs/ARCHITECTURE.md."""

    __tablename__ = "ledger_event"
    __table_args__ = (
        Index("ix_ledger_event_kind", "kind"),
        Index("ix_ledger_event_session", "session"),
        Index("ix_ledger_event_crystal_id", "crystal_id"),
        Index("ix_ledger_event_ts", "ts"),
    )

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=True))
    event_id: str = Field(sa_column=Column(String(32), nullable=False, unique=True))
    ts: float = Field(sa_column=Column(Float, nullable=False))
    kind: str = Field(sa_column=Column(String(40), nullable=False))
    session: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    domain: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    crystal_id: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    path: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    content_hash: str = Field(default="", sa_column=Column(String(64), nullable=False, default=""))
    action: str = Field(default="", sa_column=Column(String(40), nullable=False, default=""))
    channel: str = Field(default="", sa_column=Column(String(20), nullable=False, default=""))
    term: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    chars: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    truncated: int = Field(default=0, sa_column=Column(Integer, nullable=False, default=0))
    agent: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    detail: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


class ControlPlan(SQLModel, table=True):
    """The control arm's plan, written once when the ledger is created, before any data.

    Why a row and not only the config: the rate and the stop rule must be fixed before the
    results exist, so that they cannot be chosen later to suit the answer. The hook reads this
    row (``control.load_plan``); ``geode study`` shows when today's config differs from it.
    There is exactly one row, ``id = 1``.
    """

    __tablename__ = "control_plan"

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True))
    rate: float = Field(sa_column=Column(Float, nullable=False))
    stop_units: int = Field(sa_column=Column(Integer, nullable=False))
    stop_date: str | None = Field(default=None, sa_column=Column(String(32), nullable=True))
    salt: str = Field(sa_column=Column(Text, nullable=False))
    created_at: float = Field(sa_column=Column(Float, nullable=False))
    source: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))


def table_of(model: type[SQLModel]) -> Table:
    """The ``Table`` of a ``table=True`` model. SQLModel sets ``__table__`` when it creates the
    class, but its type stubs do not declare the attribute (sqlmodel 0.0.50), so it is read here,
    once, with the one ignore that says so."""
    return model.__table__  # type: ignore[attr-defined]  # set at class creation, absent from sqlmodel's stubs


def _insert_events(conn: Connection, events: list[dict]) -> int:
    """Insert events, ignoring event ids already present; returns the number of new rows."""
    table = table_of(LedgerEvent)
    ignore: Insert  # INSERT ... ON CONFLICT (event_id) DO NOTHING, in the connection's dialect
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        ignore = pg_insert(table).on_conflict_do_nothing(index_elements=["event_id"])
    elif conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        ignore = sqlite_insert(table).on_conflict_do_nothing(index_elements=["event_id"])
    else:  # pragma: no cover - only SQLite and PostgreSQL are supported
        raise RuntimeError(f"unsupported database {conn.dialect.name}")
    rows = [{name: ev[name] for name in ledger.EVENT_FIELDS} for ev in events]
    new = 0
    for start in range(0, len(rows), 500):
        # RETURNING gives the rows actually inserted; executemany rowcount is not reliable
        # across drivers (psycopg reports 0 through SQLAlchemy's insertmanyvalues).
        stmt = ignore.returning(table.c.event_id)
        new += len(conn.execute(stmt, rows[start : start + 500]).all())
    return new


def insert_events(engine: Engine, events: list[dict]) -> int:
    """Insert ledger events from the CLI side (one transaction; duplicates ignored)."""
    with engine.begin() as conn:
        return _insert_events(conn, events)


def ingest_spool_into(engine: Engine, settings) -> dict:
    """Drain the spool into the engine's ledger (SQLite or PostgreSQL); the drain report.

    Each spool file is ingested in one transaction; a crash leaves the file for the next run
    and a re-ingest is a no-op per event (``event_id`` is unique).
    """

    def insert_rows(events: list[dict]) -> int:
        with engine.begin() as conn:
            return _insert_events(conn, events)

    return ledger.drain(settings, insert_rows)


def record_plan(engine: Engine, settings) -> None:
    """Write the control plan once; a later config change never rewrites it."""
    table = table_of(ControlPlan)
    with engine.begin() as conn:
        if conn.execute(select(table.c.id).limit(1)).first() is not None:
            return
        row = {
            "id": 1,
            "rate": float(settings.withhold_rate),
            "stop_units": int(settings.stop_units),
            "stop_date": settings.stop_date,
            # A random salt unless one is configured: the assignment cannot be steered.
            "salt": settings.control_salt or os.urandom(16).hex(),
            "created_at": time.time(),
            "source": str(settings.withhold_rate_source),
        }
        ignore: Insert
        if conn.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            ignore = pg_insert(table).values(**row).on_conflict_do_nothing(index_elements=["id"])
        else:
            from sqlalchemy.dialects.sqlite import insert as sqlite_insert

            ignore = sqlite_insert(table).values(**row).on_conflict_do_nothing(index_elements=["id"])
        conn.execute(ignore)


def read_plan(engine_or_conn: Engine | Connection) -> dict | None:
    """The recorded control plan as a dict (its columns), or None when none was recorded."""
    with Session(engine_or_conn) as session:
        plan = session.exec(select(ControlPlan).order_by(col(ControlPlan.id)).limit(1)).first()
        return plan.model_dump() if plan is not None else None


def init_db(settings, drain: bool = True) -> Engine:
    """Bring the records to the current schema, record the control plan once, drain the spool.

    Call it at the start of every CLI command that touches the records. The schema comes from
    the migrations (``geode.records.migrations``: one read when already at head; every table of
    every room, created or upgraded under a lock when behind; ``MigrationError`` when the
    database is newer than this code). Spool lines that cannot be parsed are moved to
    ``spool/rejected.jsonl`` and announced on stderr; a drain that fails (the database busy
    beyond the timeout) is announced and retried next time.
    """
    engine = engine_for(settings)
    migrations.upgrade_to_head(engine)
    record_plan(engine, settings)
    if drain:
        try:
            report = ingest_spool_into(engine, settings)
        # the database busy or failing (through SQLAlchemy or the driver), the spool unreadable:
        # the lines stay in the spool; the command can still run
        except (SQLAlchemyError, ledger.sqlite3.Error, OSError) as exc:
            print(f"geode: the ledger spool was not drained this time ({exc}); it will be retried", file=sys.stderr)
            return engine
        if report["rejected"]:
            print(
                f"geode: {report['rejected']} unreadable ledger spool line(s) moved to "
                f"{os.path.join(str(settings.spool_dir), ledger.REJECTED_NAME)}",
                file=sys.stderr,
            )
    return engine
