"""The records database's migrations (``geode.records.migrations``), on SQLite and PostgreSQL.

Real databases only: SQLite files under ``tmp_path`` and fresh PostgreSQL databases at
127.0.0.1:5432 (these tests fail, not skip, when PostgreSQL is down; see tests/test_ledger.py).

"A database made by the current release" is built the way geode 0.1.0 built it: every record
table by ``SQLModel.metadata.create_all`` from the models, no ``alembic_version``. That is
only the first revision's schema while the models and the baseline agree, which
``test_head_schema_is_what_create_all_makes`` checks; when a later revision changes a model,
``release_db`` must keep building the 0.1.0 schema (freeze it then), or the adoption tests will
say so by failing.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sqlalchemy import inspect

from geode.delivery import ledger
from geode.records import migrations, models
from tests.conftest import PG_ADMIN
from tests.stores import NO_BACKGROUND_BUILD
from tests.stores import plain_settings as make_settings
from tests.test_cli import geode

ROOT = Path(__file__).resolve().parent.parent
#: The nine record tables of geode 0.1.0, written out here so that the revision's own list is
#: checked against something it does not define.
RECORD_TABLES = [
    "ledger_event",
    "control_plan",
    "proposal",
    "proposal_change",
    "proposal_action",
    "proposal_journal",
    "upkeep_run",
    "finding",
    "upkeep_night",
]
#: the tables at head: 0.1.0's and those later revisions added (0002: the facts of a proposal)
HEAD_TABLES = [*RECORD_TABLES, "proposal_fact"]
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.services)]


# -- databases ----------------------------------------------------------------------------------
@pytest.fixture()
def pg_new():
    """Makes fresh PostgreSQL databases on demand (``pg_new()`` -> URL); drops them afterwards."""
    import psycopg

    admin = psycopg.connect(PG_ADMIN, autocommit=True)  # raises (a test error) when PostgreSQL is down
    made: list[str] = []

    def new() -> str:
        name = "geode_mig_" + os.urandom(6).hex()
        admin.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"postgresql://postgres@127.0.0.1:5432/{name}"

    try:
        yield new
    finally:
        for name in made:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(params=BACKENDS)
def new_settings(request, tmp_path):
    """Makes settings for a new, empty records database of the parametrised kind."""
    counter = iter(range(1000))

    def make():
        home = tmp_path / f"home{next(counter)}"
        home.mkdir()
        url = request.getfixturevalue("pg_new")() if request.param == "postgresql" else None
        return make_settings(home, database_url=url)

    make.backend = request.param
    return make


def model_tables(names=RECORD_TABLES):
    """Every record table as the models define it (importing each room's module registers it)."""
    from sqlmodel import SQLModel

    from geode.agents import contract
    from geode.queue import tables as queue_tables  # noqa: F401  (registers the queue's tables)
    from geode.scheduler import nightly

    contract.tables()
    nightly.night_table()
    return [SQLModel.metadata.tables[name] for name in names]


def release_db(settings, tables=RECORD_TABLES, models_of=RECORD_TABLES):
    """A records database as geode 0.1.0 left it: ``create_all`` of the models, no version table
    (``models_of=HEAD_TABLES``: every table the models declare today, for the head comparison)."""
    from sqlmodel import SQLModel

    wanted = [t for t in model_tables(models_of) if t.name in tables]
    engine = models.engine_for(settings)
    with engine.begin() as conn:
        SQLModel.metadata.create_all(conn, tables=wanted)
    return engine


def fill(engine, settings) -> None:
    """Rows in every record table, with the values most likely to be bent by a careless copy:
    bytes that are not UTF-8, empty bytes and NULL, floats with all their digits, non-ASCII."""
    from geode.agents import contract
    from geode.queue.tables import A, C, J, P
    from geode.scheduler.nightly import night_table

    events = [
        ledger.new_event(
            "delivered",
            session=f"s{i}",
            crystal_id=f"main:n{i}",
            path=f"n{i}.md",
            content_hash="ab" * 32,
            action="bash",
            channel="act",
            term="| tail",
            chars=1234 + i,
            truncated=i % 2,
            agent="main",
            detail={"why": ["ü", "日本"], "i": i},
        )
        for i in range(5)
    ]
    events.append(ledger.new_event("blocked", session="s9", detail="grep -r ' secret' .", ts=1718000000.123456789))
    assert models.insert_events(engine, events) == 6
    models.record_plan(engine, settings)
    run_t, finding_t = contract.tables()
    with engine.begin() as c:
        pid = c.execute(
            P.insert().values(
                run_id="2026-01-02T03:00",
                key="k1",
                agent="librarian",
                kind="edit",
                domain="main",
                title="Fix a link — ünïcode",
                rationale="it is broken",
                evidence='[{"finding": 1}]',
                status="applied",
                message="",
                created_at=1767322800.1,
                updated_at=time.time(),
                journal_id=None,
            )
        ).inserted_primary_key[0]
        c.execute(
            C.insert(),
            [
                {
                    "proposal_id": pid,
                    "seq": 0,
                    "path": "a.md",
                    "before_sha": "0" * 64,
                    "after_sha": "1" * 64,
                    "before": bytes(range(256)),
                    "after": b"\xff\xfe\x00 not utf-8 \x80",
                    "mode": 0o100644,
                    "before_mode": 0o100600,
                },
                {
                    "proposal_id": pid,
                    "seq": 1,
                    "path": "gone.md",
                    "before_sha": "2" * 64,
                    "after_sha": None,
                    "before": b"",
                    "after": None,
                    "mode": None,
                    "before_mode": None,
                },
            ],
        )
        c.execute(
            A.insert(),
            [
                {"proposal_id": pid, "action": "filed", "outcome": "ok", "who": "librarian", "at": 1.5, "detail": ""},
                {
                    "proposal_id": pid,
                    "action": "approve",
                    "outcome": "applied",
                    "who": "ana",
                    "at": 2.25,
                    "detail": "{}",
                },
            ],
        )
        c.execute(
            J.insert().values(
                proposal_id=pid,
                op="apply",
                direction="forward",
                state="done",
                prior_status="pending",
                who="ana",
                pid=4242,
                host="box",
                started_at=3.0,
                finished_at=None,
                plan='[{"seq": 0, "path": "a.md"}]',
            )
        )
        c.execute(
            run_t.insert().values(
                run_id="2026-01-02T03:00",
                agent="librarian",
                status="ok",
                message="fine",
                examined='{"notes": 12}',
                skipped="[]",
                proposals="[1]",
                store_notes=12,
                attempts=1,
                started_at=10.0,
                finished_at=12.75,
                trigger="nightly",
            )
        )
        c.execute(
            finding_t.insert(),
            [
                {
                    "run_id": "2026-01-02T03:00",
                    "agent": "librarian",
                    "key": f"{i:032x}",
                    "kind": "broken-link",
                    "domain": "main",
                    "path": "a.md",
                    "line": 7 + i,
                    "target": "b.md",
                    "message": "no such note",
                    "suggestion": "",
                    "severity": "warning",
                }
                for i in range(3)
            ],
        )
        c.execute(
            night_table()
            .insert()
            .values(run_id="2026-01-02T03:00", due="2026-01-02T03:00:00", enqueued_at=1767322800.0, pid="999")
        )


def dump(engine) -> dict[str, tuple[list, list]]:
    """Every row of every record table, twice: as Python values, and as the database's own
    exact text of each value (SQLite ``quote()``; PostgreSQL the row cast to text), so a
    float that lost a digit or a blob re-encoded on the way shows up."""
    out = {}
    with engine.connect() as c:
        sqlite = c.dialect.name == "sqlite"
        for t in RECORD_TABLES:
            cols = [col["name"] for col in inspect(c).get_columns(t)]
            order = f'"{cols[0]}"'
            values = [tuple(r) for r in c.exec_driver_sql(f"SELECT * FROM {t} ORDER BY {order}")]
            if sqlite:
                quoted = ", ".join(f'quote("{x}")' for x in cols)
                text = [tuple(r) for r in c.exec_driver_sql(f"SELECT {quoted} FROM {t} ORDER BY {order}")]
            else:
                text = [r[0] for r in c.exec_driver_sql(f"SELECT CAST({t} AS text) FROM {t} ORDER BY {order}")]
            out[t] = (values, text)
    return out


def version_rows(engine) -> list[str]:
    with engine.connect() as c:
        return [r[0] for r in c.exec_driver_sql("SELECT version_num FROM alembic_version")]


def ddl_text(engine, url: str | None) -> list[str]:
    """The database's own DDL of the record tables, as text: SQLite's ``sqlite_master.sql``;
    PostgreSQL's ``pg_dump --schema-only`` (comments and its random ``\\restrict`` key dropped)."""
    if url is None:
        with engine.connect() as c:
            return sorted(
                f"{r[0]} {r[1]}: {r[2]}"
                for r in c.exec_driver_sql(
                    "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE '%alembic_version%'"
                )
            )
    r = subprocess.run(
        ["pg_dump", "--schema-only", "--no-owner", "--exclude-table=alembic_version", url],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [
        line
        for line in r.stdout.splitlines()
        if line.strip() and not line.startswith("--") and not line.startswith(("\\restrict", "\\unrestrict"))
    ]


def table_names(engine) -> set[str]:
    with engine.connect() as c:
        return set(inspect(c).get_table_names())


# -- the revisions themselves -------------------------------------------------------------------
def test_head_constant_and_the_baseline_match_the_scripts():
    script = migrations.script_directory()
    assert script.get_current_head() == migrations.HEAD
    assert script.get_base() == migrations.BASELINE
    revs = list(script.walk_revisions())
    assert len(revs) >= 1 and all(r.module.upgrade for r in revs)
    assert list(script.get_revision(migrations.BASELINE).module.TABLES) == RECORD_TABLES


@pytest.mark.services
@pytest.mark.parametrize("backend", BACKENDS)
def test_head_schema_is_what_create_all_makes(backend, tmp_path, pg_new):
    """The migrations and the models' create_all make the same schema: compared with the
    inspector (reflected against reflected) and with Alembic's autogenerate comparison."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from sqlmodel import SQLModel

    url_a, url_b = (pg_new(), pg_new()) if backend == "postgresql" else (None, None)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    by_models = release_db(make_settings(tmp_path / "a", database_url=url_a), tables=HEAD_TABLES, models_of=HEAD_TABLES)
    by_migrations = models.engine_for(make_settings(tmp_path / "b", database_url=url_b))
    try:
        assert migrations.upgrade_to_head(by_migrations) == "created"
        with by_models.connect() as ca, by_migrations.connect() as cb:
            a = migrations.reflect_schema(ca, HEAD_TABLES)
            b = migrations.reflect_schema(cb, HEAD_TABLES)
            assert sum(len(t["columns"]) for t in a.values()) == 95 + 8  # not a comparison of nothing
            # PostgreSQL also lists the indexes behind the four unique constraints
            assert sum(len(t["indexes"]) for t in a.values()) == (13 if backend == "sqlite" else 17)
            assert migrations.diff_schemas(a, b) == []
            assert set(inspect(cb).get_table_names()) == set(HEAD_TABLES) | {"alembic_version"}

            tables = {t.name for t in model_tables(HEAD_TABLES)}
            ctx = MigrationContext.configure(
                cb,
                opts={
                    "compare_type": True,
                    "compare_server_default": True,
                    "include_object": lambda obj, name, type_, reflected, other: type_ != "table" or name in tables,
                },
            )
            assert compare_metadata(ctx, SQLModel.metadata) == []
        # and the databases' own DDL, as text, is the same (28 objects on SQLite: 10 tables,
        # 13 indexes, 5 automatic unique indexes; pg_dump's script on PostgreSQL)
        a_ddl, b_ddl = ddl_text(by_models, url_a), ddl_text(by_migrations, url_b)
        assert len(a_ddl) >= 28 and any("CREATE TABLE" in x and "proposal_change" in x for x in a_ddl)
        assert a_ddl == b_ddl
    finally:
        by_models.dispose()
        by_migrations.dispose()


def test_the_schema_comparison_sees_a_difference(tmp_path):
    """The differ is not blind: one column type, one index and one nullability changed."""
    eng = models.engine_for(make_settings(tmp_path))
    try:
        migrations.upgrade_to_head(eng)
        with eng.connect() as c:
            good = migrations.reflect_schema(c, RECORD_TABLES)
        bad = {t: dict(v) for t, v in good.items()}
        cols = dict(bad["finding"]["columns"])
        cols["line"] = ("TEXT", False, None)
        cols["target"] = (cols["target"][0], True, None)
        bad["finding"]["columns"] = cols
        bad["proposal"]["indexes"] = bad["proposal"]["indexes"][:-1]
        diffs = migrations.diff_schemas(good, bad)
        assert any("finding.line is TEXT NOT NULL, expected INTEGER NOT NULL" in d for d in diffs), diffs
        assert any("finding.target is TEXT NULL" in d for d in diffs), diffs
        assert any(d.startswith("proposal: indexes") for d in diffs), diffs
        assert len(diffs) == 3
    finally:
        eng.dispose()


# -- start-up -----------------------------------------------------------------------------------
def test_fresh_database_gets_head_and_a_second_start_does_nothing(new_settings):
    s = new_settings()
    first = models.engine_for(s)
    try:
        assert migrations.upgrade_to_head(first) == "created"
        assert version_rows(first) == [migrations.HEAD]
        assert table_names(first) == set(HEAD_TABLES) | {"alembic_version"}
        schema_before = None
        with first.connect() as c:
            schema_before = migrations.reflect_schema(c, RECORD_TABLES)
    finally:
        first.dispose()

    second = models.engine_for(s)  # a second start: a new process, a new engine
    statements: list[str] = []
    if new_settings.backend == "sqlite":
        from sqlalchemy import event

        @event.listens_for(second, "connect")
        def _trace(dbapi_conn, _rec):
            dbapi_conn.set_trace_callback(statements.append)

    try:
        assert migrations.upgrade_to_head(second) == "current"
        assert migrations.upgrade_to_head(second) == "current"  # same engine again: not even a read
        if new_settings.backend == "sqlite":
            sql = [x for x in statements if not x.startswith("PRAGMA")]
            assert sql == ["SELECT version_num FROM alembic_version"], statements
        assert version_rows(second) == [migrations.HEAD]
        with second.connect() as c:
            assert migrations.reflect_schema(c, RECORD_TABLES) == schema_before
    finally:
        second.dispose()


def test_init_db_brings_a_fresh_database_to_head_and_records_the_plan(new_settings):
    s = new_settings()
    engine = models.init_db(s)
    try:
        assert version_rows(engine) == [migrations.HEAD]
        assert models.read_plan(engine) is not None
        # the rooms' ensure_tables are the same upgrade: nothing left for them to do
        from geode.agents import contract
        from geode.queue import tables as queue_tables

        contract.ensure_tables(engine)
        queue_tables.ensure_tables(engine)
        assert version_rows(engine) == [migrations.HEAD]
    finally:
        engine.dispose()


# -- a database made by the current release -----------------------------------------------------
def test_release_database_is_adopted_and_keeps_every_row(new_settings):
    s = new_settings()
    engine = release_db(s)
    try:
        fill(engine, s)
        before = dump(engine)
        assert all(before[t][0] for t in RECORD_TABLES), {t: len(v[0]) for t, v in before.items()}
        assert "alembic_version" not in table_names(engine)
    finally:
        engine.dispose()

    engine = models.engine_for(s)
    try:
        assert migrations.upgrade_to_head(engine) == "adopted"
        assert version_rows(engine) == [migrations.HEAD]
        assert dump(engine) == before
        if engine.dialect.name == "postgresql":  # the scratch schema of the check was rolled back
            with engine.connect() as c:
                assert (
                    c.exec_driver_sql(
                        "SELECT nspname FROM pg_namespace WHERE left(nspname, 14) = 'geode_baseline'"
                    ).all()
                    == []
                )
        # and it is the schema a fresh database gets
        fresh = models.engine_for(new_settings())
        try:
            migrations.upgrade_to_head(fresh)
            with engine.connect() as ca, fresh.connect() as cb:
                assert (
                    migrations.diff_schemas(
                        migrations.reflect_schema(cb, RECORD_TABLES), migrations.reflect_schema(ca, RECORD_TABLES)
                    )
                    == []
                )
        finally:
            fresh.dispose()
    finally:
        engine.dispose()

    # the next start (init_db, as every command runs it) changes nothing and new rows follow on
    engine = models.init_db(s)
    try:
        assert dump(engine) == before
        assert models.insert_events(engine, [ledger.new_event("delivered", session="after")]) == 1
        with engine.connect() as c:
            ids = [r[0] for r in c.exec_driver_sql("SELECT id FROM ledger_event ORDER BY id")]
        assert len(ids) == 7 and ids[-1] > max(ids[:-1])
    finally:
        engine.dispose()


def test_release_database_with_only_some_tables_gets_the_rest(new_settings):
    """0.1.0 created each room's tables on first use: a home that never ran upkeep has only
    the ledger and the plan. Those are checked and kept; the others are created."""
    s = new_settings()
    engine = release_db(s, tables=["ledger_event", "control_plan"])
    try:
        evs = [ledger.new_event("delivered", session="only", detail={"n": i}) for i in range(4)]
        models.insert_events(engine, evs)
        models.record_plan(engine, s)
        with engine.connect() as c:
            before = [tuple(r) for r in c.exec_driver_sql("SELECT * FROM ledger_event ORDER BY id")]
            plan = [tuple(r) for r in c.exec_driver_sql("SELECT * FROM control_plan")]
        assert table_names(engine) == {"ledger_event", "control_plan"}
        assert migrations.upgrade_to_head(engine) == "adopted"
        assert table_names(engine) == set(HEAD_TABLES) | {"alembic_version"}
        with engine.connect() as c:
            assert [tuple(r) for r in c.exec_driver_sql("SELECT * FROM ledger_event ORDER BY id")] == before
            assert [tuple(r) for r in c.exec_driver_sql("SELECT * FROM control_plan")] == plan
    finally:
        engine.dispose()


def test_release_database_with_another_schema_is_refused_and_left_alone(new_settings):
    s = new_settings()
    engine = release_db(
        s, tables=["ledger_event", "control_plan", "proposal", "proposal_change", "proposal_action", "proposal_journal"]
    )
    try:
        with engine.begin() as c:
            c.exec_driver_sql("ALTER TABLE proposal_change DROP COLUMN before_mode")
            c.exec_driver_sql("CREATE INDEX ix_extra ON ledger_event (agent)")
        before = table_names(engine)
        with pytest.raises(migrations.SchemaMismatch) as err:
            migrations.upgrade_to_head(engine)
        msg = str(err.value)
        assert migrations.database_name(engine) in msg
        assert "proposal_change.before_mode is missing" in msg
        assert "ix_extra" in msg and migrations.BASELINE in msg
        assert table_names(engine) == before  # no version table, no upkeep tables: nothing changed
    finally:
        engine.dispose()


# -- a later revision ---------------------------------------------------------------------------
_PROBE_REVISION = textwrap.dedent('''
    """A test-only revision: exercises the upgrade path past geode's own head."""
    import sqlalchemy as sa
    from alembic import op

    revision = "0099_test_probe"
    down_revision = "0002_proposal_fact"
    branch_labels = None
    depends_on = None


    def upgrade():
        op.add_column("upkeep_night", sa.Column("probe", sa.Text(), nullable=False, server_default="none"))
        op.create_index("ix_finding_severity", "finding", ["severity"])


    def downgrade():
        raise NotImplementedError
''')


def test_a_later_revision_upgrades_a_database_with_rows_and_older_code_refuses_it(new_settings, tmp_path, monkeypatch):
    """The upgrade path beyond the baseline, with a revision written for this test into a copy
    of the scripts: start-up applies it under the lock and keeps every row; the code that
    knows only its own head then meets a database newer than itself."""
    import shutil

    s = new_settings()
    engine = models.init_db(s)
    fill(engine, s)
    before = dump(engine)
    engine.dispose()

    scripts = tmp_path / "scripts"
    shutil.copytree(migrations.SCRIPT_DIR, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / "0099_test_probe.py").write_text(_PROBE_REVISION)
    with monkeypatch.context() as m:
        m.setattr(migrations, "SCRIPT_DIR", scripts)
        m.setattr(migrations, "HEAD", "0099_test_probe")
        engine = models.engine_for(s)
        try:
            assert migrations.upgrade_to_head(engine) == "upgraded"
            assert version_rows(engine) == ["0099_test_probe"]
            after = dump(engine)
            for t in RECORD_TABLES:
                if t != "upkeep_night":
                    assert after[t] == before[t], t
            assert [row[:-1] for row in after["upkeep_night"][0]] == before["upkeep_night"][0]
            assert [row[-1] for row in after["upkeep_night"][0]] == ["none"]
            with engine.connect() as c:
                assert "ix_finding_severity" in {ix["name"] for ix in inspect(c).get_indexes("finding")}
        finally:
            engine.dispose()

    engine = models.engine_for(s)
    try:
        with pytest.raises(migrations.SchemaTooNew, match="0099_test_probe.*0002_proposal_fact"):
            migrations.upgrade_to_head(engine)
    finally:
        engine.dispose()


# -- newer than this code -----------------------------------------------------------------------
def test_a_newer_revision_is_a_clear_error(new_settings):
    s = new_settings()
    engine = models.init_db(s)
    with engine.begin() as c:
        c.exec_driver_sql("UPDATE alembic_version SET version_num = '0042_from_the_future'")
    engine.dispose()
    engine = models.engine_for(s)
    try:
        with pytest.raises(migrations.SchemaTooNew) as err:
            models.init_db(s)
        msg = str(err.value)
        assert "0042_from_the_future" in msg and migrations.HEAD in msg
        name = migrations.database_name(engine)
        assert name in msg and ("geode.db" in name or name.startswith("postgresql"))
        assert version_rows(engine) == ["0042_from_the_future"]
    finally:
        engine.dispose()


def test_a_newer_revision_stops_a_command_with_a_message(tmp_path):
    home = tmp_path / "h"
    geode(home, "init")
    with sqlite3.connect(home / "geode.db") as c:
        c.execute("UPDATE alembic_version SET version_num = '0042_from_the_future'")
    r = geode(home, "stats", check=False)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("geode: the records database ")
    assert str(home / "geode.db") in r.stderr and "0042_from_the_future" in r.stderr and migrations.HEAD in r.stderr


# -- geode init ---------------------------------------------------------------------------------
@pytest.mark.services
@pytest.mark.parametrize("backend", BACKENDS)
def test_geode_init_on_a_fresh_home_creates_the_database_at_head(backend, tmp_path, pg_new):
    home = tmp_path / "fresh"
    env = {"GEODE_DATABASE_URL": pg_new()} if backend == "postgresql" else {}
    geode(home, "init", env=env)
    s = make_settings(home, database_url=env.get("GEODE_DATABASE_URL"))
    if backend == "sqlite":
        with sqlite3.connect(home / "geode.db") as c:  # the standard library, as the hook reads it
            assert c.execute("SELECT version_num FROM alembic_version").fetchall() == [(migrations.HEAD,)]
            names = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert set(RECORD_TABLES) <= names
    engine = models.engine_for(s)
    try:
        assert version_rows(engine) == [migrations.HEAD]
        assert set(RECORD_TABLES) <= table_names(engine)
        assert migrations.upgrade_to_head(engine) == "current"
    finally:
        engine.dispose()


# -- the hook's path is unchanged ---------------------------------------------------------------
def test_the_hook_spools_until_the_tables_exist_and_start_up_drains_it(tmp_path):
    s = make_settings(tmp_path)
    with sqlite3.connect(s.records_file) as c:  # a database file with no tables yet
        c.execute("CREATE TABLE scratch (a)")
        c.execute("DROP TABLE scratch")
    evs = [ledger.new_event("delivered", session="early") for _ in range(3)]
    assert ledger.append(s, evs) == "spool"  # missing table: the spool takes it, as before
    engine = models.init_db(s)
    try:
        with engine.connect() as c:
            got = sorted(r[0] for r in c.exec_driver_sql("SELECT event_id FROM ledger_event"))
        assert got == sorted(e["event_id"] for e in evs)
        assert ledger.append(s, [ledger.new_event("delivered", session="later")]) == "db"
    finally:
        engine.dispose()


# -- two processes at once ----------------------------------------------------------------------
_RACER = textwrap.dedent("""
    import os, sys, time
    from geode.kernel.config import load_settings
    from geode.records import migrations, models
    engine = models.engine_for(load_settings())
    open(sys.argv[1] + ".ready." + str(os.getpid()), "w").close()
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.001)
    print(migrations.upgrade_to_head(engine))
""")


def _race(settings, n: int = 4) -> list[str]:
    """``n`` processes, each with its engine made, start upgrading at the same moment."""
    go = Path(settings.home) / "go"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")} | NO_BACKGROUND_BUILD
    env.update(GEODE_HOME=str(settings.home), PYTHONPATH=str(ROOT))
    if settings.database_url:
        env["GEODE_DATABASE_URL"] = str(settings.database_url)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(go)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(n)
    ]
    deadline = time.time() + 60
    while len(list(Path(settings.home).glob("go.ready.*"))) < n:
        assert time.time() < deadline and all(p.poll() is None for p in procs), [p.communicate() for p in procs]
        time.sleep(0.01)
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return sorted(outs)


def test_processes_upgrading_a_fresh_database_at_once(new_settings):
    s = new_settings()
    outs = _race(s)
    assert outs == ["created", "current", "current", "current"]  # one did it, the others waited
    engine = models.engine_for(s)
    try:
        assert version_rows(engine) == [migrations.HEAD]
        assert table_names(engine) == set(HEAD_TABLES) | {"alembic_version"}
    finally:
        engine.dispose()


def test_processes_adopting_a_release_database_at_once(new_settings):
    s = new_settings()
    engine = release_db(s, tables=["ledger_event", "control_plan"])
    fill_ledger = [ledger.new_event("delivered", session=f"r{i}") for i in range(20)]
    models.insert_events(engine, fill_ledger)
    engine.dispose()
    outs = _race(s)
    assert outs == ["adopted", "current", "current", "current"]
    engine = models.engine_for(s)
    try:
        assert version_rows(engine) == [migrations.HEAD]
        with engine.connect() as c:
            got = sorted(r[0] for r in c.exec_driver_sql("SELECT event_id FROM ledger_event"))
        assert got == sorted(e["event_id"] for e in fill_ledger)
    finally:
        engine.dispose()


# -- the maintainers' commands ------------------------------------------------------------------
def test_offline_sql_prints_the_baseline_for_review():
    r = subprocess.run(
        [sys.executable, "-m", "geode.records.migrations", "sql", "--dialect", "postgresql"],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    for name in HEAD_TABLES:
        assert f"CREATE TABLE {name} (" in r.stdout
    assert f"INSERT INTO alembic_version (version_num) VALUES ('{migrations.BASELINE}')" in r.stdout
    assert f"UPDATE alembic_version SET version_num='{migrations.HEAD}'" in r.stdout
