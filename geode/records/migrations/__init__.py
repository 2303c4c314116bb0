"""Migrations of the records database (Alembic), run by ``geode init`` and at every start-up.

What they cover: the records that can never be rebuilt from the markdown files: the usage
ledger and the control plan (``geode.records.models``), the approval queue
(``geode.queue.tables``), upkeep runs and findings (``geode.agents.tables``) and the
scheduler's nights (``geode.scheduler.tables``), all SQLModel classes. Not the recall index
(``recall_*`` tables in the same database, ``geode.recall.index_tables``): it is derived from
the files, keeps ``create_all`` and is rebuilt by ``geode reindex --wipe``; these migrations
never look at it.

How they run: ``upgrade_to_head(engine)``, called by ``models.init_db`` (every command that
touches the records, ``geode init`` included) and by the rooms' ``ensure_tables``. At head it
costs one read of ``alembic_version`` outside any transaction (and nothing on a later call with
the same engine). Behind, it takes a lock, reads the version again (another process may have
upgraded meanwhile) and upgrades, all in one transaction: the PostgreSQL advisory lock
``PG_LOCK_KEY`` held to the end of the transaction, or SQLite's write lock (``BEGIN IMMEDIATE``,
which ``models.engine_for`` issues for every transaction). Both databases have transactional
DDL, so a failed upgrade leaves the database as it was. No ``alembic.ini``: the configuration is
built here, and the scripts ship inside the package (``versions/``, ``env.py``,
``script.py.mako``).

A database made before migrations (geode 0.1.0: tables by ``create_all``, no
``alembic_version``) is adopted: the record tables it has are compared with the first revision
as this very database would make them (the revision run into a scratch database, SQLite in
memory, or a PostgreSQL schema inside a rolled-back savepoint, both reflected the same way);
any difference is an error that names the table and column and changes nothing. The tables it
lacks (0.1.0 created each room's tables on first use) are created, the database is stamped
``0001_baseline`` and upgraded to head (``0002_proposal_fact`` adds the table of the facts each
proposal rests on).

A database at a revision this code does not know (a newer geode upgraded it) is an error
(``SchemaTooNew``) naming the database and both revisions; nothing is changed.

Making a new revision
---------------------
1. Change the model where it lives (e.g. a column on ``Proposal`` in ``geode/queue/tables.py``).
2. ``python -m geode.records.migrations revision -m "finding rule column"`` writes
   ``versions/0002_finding_rule_column.py`` whose ``down_revision`` is the current head.
3. Write ``upgrade()`` with explicit operations (``op.add_column``, ``op.create_index``,
   ``op.create_table``...), never importing the models: a revision is a frozen record of the
   schema at that step, and ``delivery`` may not import the rooms above it. For SQLite, any
   change other than adding a table, column or index goes through
   ``with op.batch_alter_table("t") as batch:`` (SQLite cannot alter a column in place). A new
   NOT NULL column needs a ``server_default`` (existing rows must get a value). Move data with
   ``op.get_bind()`` and ``sa.table()``/``sa.column()``, never with the ORM. ``downgrade()`` may
   raise: geode never drops records.
4. Set ``HEAD`` below to the new revision id (a test checks it against the scripts; the fast
   start-up check compares with it without loading Alembic).
5. Run ``tests/test_migrations.py``: it builds a database with the migrations and one with the
   models' ``create_all`` on SQLite and PostgreSQL and requires zero differences, and upgrades a
   database full of rows from the baseline, keeping every row. Add a test for the data your
   revision moves. ``python -m geode.records.migrations sql`` prints the SQL for review.
"""

from __future__ import annotations

import os
from pathlib import Path

from geode.kernel.errors import RecordsError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the CLI's start-up 3 ms
if TYPE_CHECKING:  # SQLAlchemy and Alembic load only when needed: the at-head check needs neither
    from weakref import WeakSet

    from sqlalchemy.engine import Connection, Engine

#: The newest revision this code knows; ``versions/`` must end here (tests/test_migrations.py).
HEAD = "0002_proposal_fact"
#: The first revision: the schema geode 0.1.0 made with ``create_all``.
BASELINE = "0001_baseline"
VERSION_TABLE = "alembic_version"
#: ``pg_advisory_xact_lock`` key for upgrades (any constant; these are the bytes of "geode-mg").
PG_LOCK_KEY = 0x67656F64652D6D67
SCRIPT_DIR = Path(__file__).resolve().parent

#: Engines already checked at head in this process: later calls cost nothing. A WeakSet made on
#: first use (SQLAlchemy has imported weakref by then; the CLI's start-up has not).
_AT_HEAD: WeakSet[Engine] | None = None


class MigrationError(RecordsError, RuntimeError):
    """The records database cannot be brought to this geode's schema; the message names the
    database and says why. Nothing was changed."""


class SchemaTooNew(MigrationError):
    """The database is at a revision this geode does not know (a newer geode upgraded it)."""


class SchemaMismatch(MigrationError):
    """A database made before migrations whose tables are not the first revision's."""


def database_name(engine: Engine) -> str:
    """The database as a person recognises it: the SQLite file, or the URL without password."""
    url = engine.url
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


def current_heads(engine: Engine) -> tuple[str, ...] | None:
    """The revisions recorded in ``alembic_version``, or None when there is no such table.

    Read on a raw connection outside any transaction: on SQLite a transaction opened through
    ``engine_for`` would take the write lock, and start-up must not queue behind the hooks.
    """
    try:
        raw = engine.raw_connection()
    except engine.dialect.loaded_dbapi.Error as exc:  # the pool does not wrap a failed connect
        raise RecordsError(
            f"the records database {database_name(engine)} cannot be used ({exc})",
            hint="check [database] url in geode.toml (or GEODE_DATABASE_URL), that the database "
            "runs and that this user may write there",
        ) from exc
    try:
        cur = raw.cursor()
        try:
            cur.execute(f"SELECT version_num FROM {VERSION_TABLE}")
            return tuple(row[0] for row in cur.fetchall())
        finally:
            cur.close()
    except engine.dialect.loaded_dbapi.Error:
        return None  # no version table (a new or a pre-migration database)
    finally:
        raw.close()  # back to the pool, which rolls back whatever the read opened


def upgrade_to_head(engine: Engine) -> str:
    """Bring the records database to ``HEAD`` if it is behind; what was done.

    ``"current"``: already at head (one read; nothing on a second call with this engine).
    ``"created"``: a new database got every table. ``"adopted"``: a database made before
    migrations was checked, completed and stamped. ``"upgraded"``: revisions were applied.
    Raises ``SchemaTooNew`` or ``SchemaMismatch`` (subclasses of ``MigrationError``).
    """
    global _AT_HEAD
    if _AT_HEAD is None:
        import weakref

        _AT_HEAD = weakref.WeakSet()
    if engine in _AT_HEAD:
        return "current"
    if current_heads(engine) == (HEAD,):
        _AT_HEAD.add(engine)
        return "current"
    with engine.begin() as conn:
        _lock(conn)
        done = _upgrade_locked(conn, database_name(engine))
    _AT_HEAD.add(engine)
    return done


def _lock(conn: Connection) -> None:
    """Serialise upgrades between processes until this transaction ends."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(%(key)s)", {"key": PG_LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        # engine_for's "begin" listener issued BEGIN IMMEDIATE: we already hold the write lock.
        dbapi = conn.connection.dbapi_connection  # None only once the connection is closed
        if dbapi is None or not dbapi.in_transaction:
            raise MigrationError(
                "the records database must be opened with geode.records.models.engine_for "
                "(BEGIN IMMEDIATE), so that two processes never upgrade it at once"
            )
    else:
        raise MigrationError(f"unsupported records database {conn.dialect.name}: geode supports SQLite and PostgreSQL")


def alembic_config(conn: Connection | None = None, **attributes: object):
    """Alembic's configuration, built in code (no ``alembic.ini``), sharing ``conn``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_DIR).replace("%", "%%"))
    cfg.attributes["connection"] = conn
    cfg.attributes.update(attributes)
    return cfg


def script_directory(cfg=None):
    """The revisions shipped with this package (``alembic.script.ScriptDirectory``)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(cfg if cfg is not None else alembic_config())


def _upgrade_locked(conn: Connection, name: str) -> str:
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    cfg = alembic_config(conn)
    script = script_directory(cfg)
    if script.get_current_head() != HEAD:  # a revision was added without moving HEAD
        raise MigrationError(f"geode's migrations end at {script.get_current_head()} but HEAD says {HEAD}")
    heads = MigrationContext.configure(conn).get_current_heads()
    known = {s.revision for s in script.walk_revisions()}
    unknown = [h for h in heads if h not in known]
    if unknown:
        raise SchemaTooNew(
            f"the records database {name} is at revision {', '.join(unknown)}, which this geode does not "
            f"know (its newest revision is {HEAD}): a newer geode has upgraded it. Upgrade geode, or "
            "point GEODE_HOME / [database] url at another database. Nothing was changed."
        )
    if len(heads) > 1:
        raise MigrationError(
            f"the records database {name} records several revisions ({', '.join(heads)}); "
            f"geode's history is a single line ending at {HEAD}"
        )
    if heads == (HEAD,):
        return "current"  # another process upgraded it while we waited for the lock
    done = "upgraded" if heads else "created"
    if not heads:
        baseline = script.get_revision(BASELINE).module
        present = _present(conn, list(baseline.TABLES))
        if present:
            _adopt(conn, cfg, baseline, present, name)
            done = "adopted"
    command.upgrade(cfg, "head")
    return done


def _present(conn: Connection, tables: list[str]) -> list[str]:
    from sqlalchemy import inspect

    have = set(inspect(conn).get_table_names())
    return [t for t in tables if t in have]


def _adopt(conn: Connection, cfg, baseline, present: list[str], name: str) -> None:
    """Check a pre-migration database against the first revision, complete it, stamp it."""
    from alembic import command
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    diffs = diff_schemas(baseline_schema(conn, present, baseline), reflect_schema(conn, present))
    if diffs:
        raise SchemaMismatch(
            f"the records database {name} was made before migrations (it has no {VERSION_TABLE} table), "
            f"and its tables are not those of the first revision {BASELINE}: "
            + "; ".join(diffs)
            + ". Nothing was changed."
        )
    with Operations.context(MigrationContext.configure(conn)):
        for table, create in baseline.TABLES.items():
            if table not in present:
                create()  # 0.1.0 created each room's tables on first use
    command.stamp(cfg, BASELINE)


def _run_revision(conn: Connection, module) -> None:
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    with Operations.context(MigrationContext.configure(conn)):
        module.upgrade()


def baseline_schema(conn: Connection, tables: list[str], baseline=None) -> dict:
    """The first revision's tables as ``conn``'s kind of database makes them, reflected.

    SQLite: the revision runs into an in-memory database. PostgreSQL: into a scratch schema
    inside a savepoint that is rolled back. Comparing reflected with reflected, on the same
    dialect, leaves nothing to normalise by hand.
    """
    from sqlalchemy import create_engine

    if baseline is None:
        baseline = script_directory().get_revision(BASELINE).module
    if conn.dialect.name == "sqlite":
        scratch = create_engine("sqlite://")
        try:
            with scratch.begin() as sc:
                _run_revision(sc, baseline)
                return reflect_schema(sc, tables)
        finally:
            scratch.dispose()
    schema = "geode_baseline_" + os.urandom(6).hex()
    savepoint = conn.begin_nested()
    try:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        # SET LOCAL is undone with the savepoint; the search path makes the revision's
        # unqualified names (and the reflected serial defaults) land in the scratch schema.
        conn.exec_driver_sql(f'SET LOCAL search_path TO "{schema}"')
        _run_revision(conn, baseline)
        return reflect_schema(conn, tables, schema=schema)
    finally:
        savepoint.rollback()


def reflect_schema(conn: Connection, tables: list[str], schema: str | None = None) -> dict:
    """Each table's columns (in order: type, nullable, server default), primary key, indexes,
    unique, foreign-key and check constraints, as SQLAlchemy's inspector reads them."""
    from sqlalchemy import inspect

    insp = inspect(conn)

    def default(value) -> str | None:
        if value is None:
            return None
        # SQLAlchemy qualifies a serial's sequence with the schema asked for; a table in the
        # default schema reads unqualified. The scratch schema's name is not part of the schema.
        return str(value).replace(f'"{schema}".', "").replace(f"{schema}.", "") if schema else str(value)

    out: dict = {}
    for t in tables:
        cols = {
            c["name"]: (c["type"].compile(dialect=conn.dialect), bool(c["nullable"]), default(c.get("default")))
            for c in insp.get_columns(t, schema=schema)
        }
        pk = insp.get_pk_constraint(t, schema=schema)
        out[t] = {
            "columns": cols,
            "column order": tuple(cols),
            "primary key": (pk.get("name"), tuple(pk.get("constrained_columns") or ())),
            "indexes": sorted(
                (ix["name"], tuple(ix["column_names"]), bool(ix["unique"])) for ix in insp.get_indexes(t, schema=schema)
            ),
            "unique constraints": sorted(
                (uc["name"] or "", tuple(uc["column_names"])) for uc in insp.get_unique_constraints(t, schema=schema)
            ),
            "foreign keys": sorted(
                (
                    fk["name"] or "",
                    tuple(fk["constrained_columns"]),
                    fk["referred_table"],
                    tuple(fk["referred_columns"]),
                    tuple(sorted((fk.get("options") or {}).items())),
                )
                for fk in insp.get_foreign_keys(t, schema=schema)
            ),
            "check constraints": sorted(
                (cc["name"] or "", cc["sqltext"]) for cc in insp.get_check_constraints(t, schema=schema)
            ),
        }
    return out


def diff_schemas(expected: dict, actual: dict) -> list[str]:
    """Every difference between two ``reflect_schema`` results, in words; [] when equal."""
    out: list[str] = []
    for t in sorted(set(expected) | set(actual)):
        if t not in actual:
            out.append(f"table {t} is missing")
            continue
        if t not in expected:
            out.append(f"table {t} is not expected")
            continue
        e, a = expected[t], actual[t]
        for col, spec in e["columns"].items():
            if col not in a["columns"]:
                out.append(f"{t}.{col} is missing")
            elif a["columns"][col] != spec:
                out.append(f"{t}.{col} is {_col(a['columns'][col])}, expected {_col(spec)}")
        out.extend(f"{t}.{col} is not expected" for col in a["columns"] if col not in e["columns"])
        if set(e["columns"]) == set(a["columns"]) and e["column order"] != a["column order"]:
            out.append(f"{t}: columns in order {', '.join(a['column order'])}, expected {', '.join(e['column order'])}")
        for key in ("primary key", "indexes", "unique constraints", "foreign keys", "check constraints"):
            if e[key] != a[key]:
                out.append(f"{t}: {key} {a[key]}, expected {e[key]}")
    return out


def _col(spec: tuple) -> str:
    typ, nullable, default = spec
    return f"{typ} {'NULL' if nullable else 'NOT NULL'}" + (f" DEFAULT {default}" if default is not None else "")
