"""The recall index's read side as SQL text: one small interface (``connect()`` gives a
connection with ``rows``/``all``/``column``/``scalar``, each taking SQL with named ``:params``),
on the standard library's ``sqlite3`` for an SQLite file and on SQLAlchemy's ``text()`` for
anything else (PostgreSQL).

Why: SQLAlchemy's import is ~0.3 s, more than half of a cold ``geode search`` (issue 10's
0.5 s bar). A search on SQLite reads through ``sqlite3`` and imports no SQLAlchemy unless it
must write (a new or older schema, or a folder that changed since the last refresh: the
writers in ``geode.recall.recall_index`` import it then). The SQL is written once: both readers
run the same text, and ``tests/test_recall_sqlread.py`` checks that searches answer the same
through either.

The stdlib connection is one per thread (and process), opened ``mode=rw`` (it never creates the
file) with ``PRAGMA query_only`` (it never writes) and the engine's busy timeout; the writer
keeps the file in WAL mode, so a read never waits for a writer. Outside a transaction, each
statement reads one snapshot, as the SQLAlchemy reader's connection does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from geode.kernel.config import records_file

BUSY_TIMEOUT_MS = 10_000  # as geode.recall.index_tables' reader engine

#: ``recall_note``'s columns, in the table's order (``index_tables.notes_t``; a test checks they
#: agree): a note row is selected by name, never ``*`` (PostgreSQL's table also holds ``tsv``).
NOTE_COLUMNS = (
    "id",
    "domain",
    "root",
    "path",
    "permalink",
    "name",
    "title",
    "type",
    "status",
    "description",
    "salience",
    "tags",
    "frontmatter",
    "body",
    "body_line",
    "content_hash",
    "mtime_ns",
    "size",
    "recorded",
    "valid_from",
    "valid_to",
    "embed_text_hash",
    "embed_model",
    "embed_hash",
    "indexed_at",
    "dates",
)
NOTE_SELECT = "SELECT " + ", ".join(f"recall_note.{c}" for c in NOTE_COLUMNS) + " FROM recall_note"

#: the layout of the derived tables (``recall_meta`` key ``layout``), raised when a column is
#: added to what is derived: an index of an older layout is not complete, so opening it runs
#: ``index_tables.ensure_schema``, which upgrades it (2: the ``dates`` column, issue 26)
INDEX_LAYOUT = "2"

#: recall_meta keys of ``recall_word`` (``index_tables.keep_word_counts``): the notes at its last
#: build, and the notes touched by refreshes since
WORDS_AT, WORDS_STALE = "words_notes", "words_touched"

#: every table, index and virtual table ``index_tables.ensure_schema`` creates on SQLite (a
#: test checks they agree): when all exist, opening the index has nothing to create.
SQLITE_SCHEMA = frozenset(
    {
        ("table", "recall_note"),
        ("table", "recall_fm"),
        ("table", "recall_tag"),
        ("table", "recall_link"),
        ("table", "recall_obs"),
        ("table", "recall_dir"),
        ("table", "recall_meta"),
        ("table", "recall_word"),
        ("table", "recall_fts"),
        ("index", "ux_recall_note_domain_path"),
        ("index", "ix_recall_note_permalink"),
        ("index", "ix_recall_note_mtime"),
        ("index", "ix_recall_note_type"),
        ("index", "ix_recall_note_status"),
        ("index", "ix_recall_note_recorded"),
        ("index", "ix_recall_note_embed"),
        ("index", "ix_recall_note_stale"),
        ("index", "ix_recall_fm_key_val"),
        ("index", "ix_recall_fm_note"),
        ("index", "ix_recall_tag_tag"),
        ("index", "ix_recall_tag_note"),
        ("index", "ix_recall_link_note"),
        ("index", "ix_recall_obs_note"),
    }
)


def dialect_of(url: str) -> str:
    """``sqlite`` or ``postgresql`` (SQLAlchemy's dialect name) from a database URL."""
    name = url.split(":", 1)[0].split("+", 1)[0].lower()
    return "postgresql" if name == "postgres" else name


def sqlite_path(url: str) -> str | None:
    """The file of a plain ``sqlite:///path`` URL; None for anything the stdlib reader does not
    take (another database, in memory, URL options): those read through SQLAlchemy."""
    if "?" in url:
        return None
    return records_file(url, "")  # the one reading of a URL's file


def in_list(column: str, values: Sequence[Any], params: dict, prefix: str) -> str:
    """``column IN (:prefix0, :prefix1, ...)`` with the values added to ``params``; an empty
    list selects nothing (``1 = 0``), as SQLAlchemy's empty ``in_`` does."""
    if not values:
        return "1 = 0"
    names = []
    for i, v in enumerate(values):
        params[f"{prefix}{i}"] = v
        names.append(f":{prefix}{i}")
    return f"{column} IN ({', '.join(names)})"


class SqliteConn:
    """One use of the thread's ``sqlite3`` connection (a new object per ``connect()``: callers
    that cache per search tell searches apart by it)."""

    def __init__(self, raw) -> None:
        self._raw = raw

    def _run(self, sql: str, params: dict | None):
        return self._raw.execute(sql, params or {})

    def rows(self, sql: str, params: dict | None = None) -> list[dict]:
        cur = self._run(sql, params)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]

    def all(self, sql: str, params: dict | None = None) -> list[tuple]:
        return self._run(sql, params).fetchall()

    def column(self, sql: str, params: dict | None = None) -> list:
        return [r[0] for r in self._run(sql, params).fetchall()]

    def scalar(self, sql: str, params: dict | None = None):
        r = self._run(sql, params).fetchone()
        return r[0] if r is not None else None


class SqliteReader:
    """Reads an SQLite file through ``sqlite3``: one read-only connection per thread."""

    kind = "sqlite3"

    def __init__(self, path: str) -> None:
        self.path = path
        self._local = threading.local()
        self._schema_seen = False

    def _raw(self):
        import sqlite3
        from urllib.parse import quote

        held = getattr(self._local, "conn", None)
        if held is not None and held[0] == os.getpid():
            return held[1]
        raw = sqlite3.connect(
            f"file:{quote(os.path.abspath(self.path))}?mode=rw",
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000.0,
            isolation_level=None,
        )
        raw.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        raw.execute("PRAGMA query_only = 1")
        self._local.conn = (os.getpid(), raw)
        return raw

    @contextmanager
    def connect(self) -> Iterator[SqliteConn]:
        yield SqliteConn(self._raw())

    def schema(self) -> set[tuple[str, str]]:
        """The (type, name) of what exists; empty when the file does not (nothing is created)."""
        import sqlite3

        if not os.path.exists(self.path):
            return set()
        try:
            with self.connect() as conn:
                return {(t, n) for t, n in conn.all("SELECT type, name FROM sqlite_master")}
        except sqlite3.Error:  # unreadable now: the writer's open says why
            return set()

    def schema_complete(self) -> bool:
        """Everything ``ensure_schema`` creates exists, in the current layout (``INDEX_LAYOUT``;
        checked once per process: what exists stays; ``geode reindex --wipe`` deletes rows, not
        tables)."""
        if not self._schema_seen:
            self._schema_seen = self.schema() >= SQLITE_SCHEMA and self.layout() == INDEX_LAYOUT
        return self._schema_seen

    def layout(self) -> str | None:
        """The layout ``ensure_schema`` last wrote (``recall_meta``), None before layouts were kept."""
        import sqlite3

        try:
            with self.connect() as conn:
                return conn.scalar("SELECT v FROM recall_meta WHERE k = 'layout'")
        except sqlite3.Error:
            return None

    def close(self) -> None:
        """Close this thread's connection (the next read opens another)."""
        held = getattr(self._local, "conn", None)
        if held is not None:
            self._local.conn = None
            if held[0] == os.getpid():
                held[1].close()


_READERS: dict[str, SqliteReader] = {}


def sqlite_reader(path: str) -> SqliteReader:
    """The process's reader of one SQLite file (its connections are reused, one per thread)."""
    key = os.path.abspath(path)
    r = _READERS.get(key)
    if r is None:
        r = _READERS[key] = SqliteReader(key)
    return r


def forget_readers() -> None:
    """Close this thread's connections and forget the readers (``index_tables.dispose_engines``)."""
    for r in _READERS.values():
        r.close()
    _READERS.clear()


class SAConn:
    """One SQLAlchemy connection, read through ``text()``."""

    def __init__(self, conn) -> None:
        self._conn = conn

    def _run(self, sql: str, params: dict | None):
        from sqlalchemy import text

        return self._conn.execute(text(sql), params or {})

    def rows(self, sql: str, params: dict | None = None) -> list[dict]:
        return [dict(r) for r in self._run(sql, params).mappings().all()]

    def all(self, sql: str, params: dict | None = None) -> list[tuple]:
        return [tuple(r) for r in self._run(sql, params).all()]

    def column(self, sql: str, params: dict | None = None) -> list:
        return list(self._run(sql, params).scalars().all())

    def scalar(self, sql: str, params: dict | None = None):
        return self._run(sql, params).scalar()


class SAReader:
    """Reads through a SQLAlchemy engine (PostgreSQL; and the tests' second reader on SQLite)."""

    kind = "sqlalchemy"

    def __init__(self, engine) -> None:
        self.engine = engine

    @contextmanager
    def connect(self) -> Iterator[SAConn]:
        with self.engine.connect() as conn:
            yield SAConn(conn)


def db_errors() -> tuple[type[BaseException], ...]:
    """What a failed read raises: ``sqlite3.Error``, and SQLAlchemy's ``DBAPIError`` when
    SQLAlchemy is loaded (it wraps the driver's errors)."""
    import sqlite3
    import sys

    sa_exc = sys.modules.get("sqlalchemy.exc")
    return (sqlite3.Error,) if sa_exc is None else (sqlite3.Error, sa_exc.DBAPIError)
