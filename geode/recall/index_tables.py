"""The recall index's tables (``recall_*``: notes, frontmatter values, tags, links,
observations, folder mtimes, meta), the SQL side of full text (FTS5 on SQLite, a ``tsvector``
on PostgreSQL) and the writer/reader engines.

Apart from ``geode.recall.recall_index`` (refreshing from the files) because search, context,
vectors and the page read these tables without refreshing anything. Being derived, they are not
migrated: ``ensure_schema`` keeps ``create_all`` and a changed layout is rebuilt
(``geode reindex --wipe``).

Why SQLAlchemy ``Table`` objects and not SQLModel classes like the records: a cold ``geode
search`` that finds a changed folder refreshes it through these tables, and importing SQLModel
would add about 0.2 s to that search (tests/test_recall_cold_path.py asserts that it does not
load). They are not records either: they sit on their own ``metadata``, outside the records
migrations, and are rebuilt from the files.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Float, Index, Integer, MetaData, String, Table, Text, create_engine, text

from geode.recall.sqlread import INDEX_LAYOUT, WORDS_AT, WORDS_STALE

#: title, tags, description, body, dates (the day terms of ``geode.recall.date_terms``: a day
#: the note tells weighs as its tags do)
FTS_WEIGHTS = (8.0, 5.0, 3.0, 1.0, 5.0)
#: a note with no vector, or one made from other text (by any model): the partial index's
#: condition, written the same way in the queries that use it (SQLite matches it as written)
STALE_SQL = "embed_hash IS NULL OR embed_model IS NULL OR embed_hash != embed_text_hash"

metadata = MetaData()

notes_t = Table(
    "recall_note",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("domain", Text, nullable=False),
    Column("root", Text, nullable=False),
    Column("path", Text, nullable=False),
    Column("permalink", Text, nullable=False),
    Column("name", Text, nullable=False, default=""),
    Column("title", Text, nullable=False, default=""),
    Column("type", Text, nullable=False, default=""),
    Column("status", Text, nullable=False, default=""),
    Column("description", Text, nullable=False, default=""),
    Column("salience", Float, nullable=True),
    Column("tags", Text, nullable=False, default="[]"),
    Column("frontmatter", Text, nullable=False, default="{}"),
    Column("body", Text, nullable=False, default=""),
    Column("body_line", Integer, nullable=False, default=1),
    Column("content_hash", String(64), nullable=False),
    Column("mtime_ns", BigInteger, nullable=False, default=0),
    Column("size", BigInteger, nullable=False, default=0),
    Column("recorded", String(32), nullable=False, default=""),
    Column("valid_from", String(32), nullable=True),
    Column("valid_to", String(32), nullable=True),
    Column("embed_text_hash", String(64), nullable=False, default=""),
    Column("embed_model", Text, nullable=True),
    Column("embed_hash", String(64), nullable=True),
    Column("indexed_at", Float, nullable=False, default=0.0),
    # derived: the day terms of the dates the note tells (geode.recall.date_terms.index_terms)
    Column("dates", Text, nullable=False, default=""),
    Index("ux_recall_note_domain_path", "domain", "path", unique=True),
    Index("ix_recall_note_permalink", "domain", "permalink"),
    Index("ix_recall_note_mtime", "mtime_ns"),
    # the filters on a note's own columns (type, status, after): a narrow one reads its notes,
    # and a count of its scope reads the index alone, not 100,000 wide rows (issue 25)
    Index("ix_recall_note_type", "domain", "type"),
    Index("ix_recall_note_status", "domain", "status"),
    Index("ix_recall_note_recorded", "domain", "recorded"),
    # covers the pending count (search says how many notes wait for a vector) without the table
    Index("ix_recall_note_embed", "domain", "embed_model", "embed_hash", "embed_text_hash"),
    # the notes whose vector is missing or stale whatever the model (usually none): the pending
    # count reads them and two ranges of the index above, not every note (35 ms at 100,000)
    Index(
        "ix_recall_note_stale",
        "domain",
        "embed_model",
        "embed_hash",
        "embed_text_hash",
        sqlite_where=text(STALE_SQL),
        postgresql_where=text(STALE_SQL),
    ),
)

fm_t = Table(
    "recall_fm",
    metadata,
    Column("note_id", Integer, nullable=False),
    Column("key", Text, nullable=False),
    Column("val", Text, nullable=False),  # lower-cased text of the value (each element of a list)
    Column("num", Float, nullable=True),  # the value as a number, when it is one
    Index("ix_recall_fm_key_val", "key", "val"),
    Index("ix_recall_fm_note", "note_id"),
)

tags_t = Table(
    "recall_tag",
    metadata,
    Column("note_id", Integer, nullable=False),
    Column("tag", Text, nullable=False),
    Index("ix_recall_tag_tag", "tag"),
    Index("ix_recall_tag_note", "note_id"),
)

links_t = Table(
    "recall_link",
    metadata,
    Column("note_id", Integer, nullable=False),
    Column("line", Integer, nullable=False),
    Column("kind", String(16), nullable=False),  # relation | wiki | markdown | reference | frontmatter
    Column("relation", Text, nullable=False),  # the typed relation, or links_to for prose
    Column("target", Text, nullable=False),
    Index("ix_recall_link_note", "note_id"),
)

obs_t = Table(
    "recall_obs",
    metadata,
    Column("note_id", Integer, nullable=False),
    Column("line", Integer, nullable=False),
    Column("category", Text, nullable=False, default=""),
    Column("text", Text, nullable=False),
    Index("ix_recall_obs_note", "note_id"),
)

dirs_t = Table(
    "recall_dir",
    metadata,
    Column("domain", Text, primary_key=True),
    Column("dir", Text, primary_key=True),
    Column("mtime_ns", BigInteger, nullable=False),
)

meta_t = Table(
    "recall_meta",
    metadata,
    Column("k", String(64), primary_key=True),
    Column("v", Text, nullable=False),
)

#: how many notes hold each full-text token (FTS5's own tokens, as ``fts5vocab`` lists them): the
#: prompt hook's text fallback reads a word's rarity here in one lookup, where counting its
#: postings in FTS5 reads up to ``prompt_recall.SCORE_BOUND`` of them per form (issue 25). Derived
#: from ``recall_fts`` by :func:`keep_word_counts`, after a refresh that changed enough notes.
words_t = Table(
    "recall_word",
    metadata,
    Column("term", Text, primary_key=True),
    Column("docs", Integer, nullable=False),
    sqlite_with_rowid=False,
)

CHILD_TABLES = (fm_t, tags_t, links_t, obs_t)


# -- engines ------------------------------------------------------------------------------
_ENGINES: dict = {}


def engines(settings):
    """(writer, reader) engines. On SQLite the writer begins with BEGIN IMMEDIATE (the records'
    engine); the reader begins deferred, so a search never waits for the write lock."""
    from geode.records.sql_engines import engine_for  # not models: no SQLModel import

    key = settings.db_url
    if key in _ENGINES:
        return _ENGINES[key]
    w = engine_for(settings)
    if w.dialect.name == "sqlite":
        from sqlalchemy import event

        r = create_engine(str(w.url), connect_args={"timeout": 10.0})

        @event.listens_for(r, "connect")
        def _on_connect(dbapi_conn, _rec):
            dbapi_conn.execute("PRAGMA busy_timeout = 10000")
    else:
        r = w
    _ENGINES[key] = (w, r)
    return w, r


def dispose_engines() -> None:
    from geode.recall.sqlread import forget_readers

    forget_readers()
    for w, r in _ENGINES.values():
        w.dispose()
        if r is not w:
            r.dispose()
    _ENGINES.clear()


FTS_CREATE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS recall_fts USING fts5("
    "title, tags, description, body, dates, tokenize = 'unicode61 remove_diacritics 2')"
)
#: PostgreSQL's full text of a note, as FTS5's columns (``simple``: no stemming, the store is multilingual)
PG_TSV = (
    "setweight(to_tsvector('simple', coalesce(title, '')), 'A') || "
    "setweight(to_tsvector('simple', replace(replace(replace(tags, '[', ' '), ']', ' '), '\"', ' ')), 'B') || "
    "setweight(to_tsvector('simple', coalesce(description, '')), 'B') || "
    "setweight(to_tsvector('simple', coalesce(body, '')), 'D') || "
    "setweight(to_tsvector('simple', coalesce(dates, '')), 'B')"
)


def ensure_schema(engine) -> None:
    """Create what is missing and bring an older layout to ``INDEX_LAYOUT``: every change to the
    derived tables' layout is made here, in one transaction (on SQLite the writer's ``BEGIN
    IMMEDIATE``: two processes opening an old index upgrade it once)."""
    with engine.begin() as conn:
        metadata.create_all(conn)
        for table in metadata.tables.values():  # indexes added after a table was first created
            for ix in table.indexes:
                ix.create(conn, checkfirst=True)
        if conn.dialect.name == "sqlite":
            cols = {r[1] for r in conn.exec_driver_sql("PRAGMA table_info(recall_note)")}
            if "dates" not in cols:  # layout 1: the note rows lack their dates
                conn.exec_driver_sql("ALTER TABLE recall_note ADD COLUMN dates TEXT NOT NULL DEFAULT ''")
            fts = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = 'recall_fts'").scalar()
            if fts is not None and "dates" not in fts:  # layout 1: four columns
                conn.exec_driver_sql("DROP TABLE recall_fts")
            conn.exec_driver_sql(FTS_CREATE)
            if fts is not None and "dates" not in fts:
                _fill_dates(conn, sqlite=True)
        else:
            conn.exec_driver_sql("ALTER TABLE recall_note ADD COLUMN IF NOT EXISTS tsv tsvector")
            conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_recall_note_tsv ON recall_note USING GIN (tsv)")
            had = conn.exec_driver_sql(
                "SELECT count(*) FROM information_schema.columns WHERE table_name = 'recall_note' "
                "AND column_name = 'dates' AND table_schema = current_schema()"
            ).scalar()
            if not had:
                conn.exec_driver_sql("ALTER TABLE recall_note ADD COLUMN dates TEXT NOT NULL DEFAULT ''")
                _fill_dates(conn, sqlite=False)
        conn.exec_driver_sql("DELETE FROM recall_meta WHERE k = 'layout'")
        conn.exec_driver_sql(f"INSERT INTO recall_meta (k, v) VALUES ('layout', '{INDEX_LAYOUT}')")


def _fill_dates(conn, sqlite: bool) -> None:
    """An index of layout 1 upgraded in place: each note's ``dates`` computed from its stored row
    (the frontmatter, title, path and body ``note_rows`` computes them from) and its full text
    written again. The rows are derived from the files anyway; this spares re-reading them and
    keeps every note's embedding state (nothing is embedded again)."""
    import json

    from geode.recall.date_terms import index_terms

    rows = conn.exec_driver_sql("SELECT id, title, tags, description, body, frontmatter, path FROM recall_note").all()
    fts, upd = [], []
    for nid, title, tags, desc, body, fm, path in rows:
        try:
            front = json.loads(fm or "{}")
        except ValueError:
            front = {}
        dates = index_terms(front if isinstance(front, dict) else {}, title or "", path or "", body or "")
        upd.append({"d": dates, "i": nid})
        fts.append((nid, title, " ".join(json.loads(tags or "[]")), desc, body, dates))
    if upd:
        conn.execute(text("UPDATE recall_note SET dates = :d WHERE id = :i"), upd)
    if sqlite and fts:
        conn.exec_driver_sql(
            "INSERT INTO recall_fts(rowid, title, tags, description, body, dates) VALUES (?, ?, ?, ?, ?, ?)", fts
        )
    elif fts:
        conn.exec_driver_sql(f"UPDATE recall_note SET tsv = {PG_TSV}")


#: rebuild ``recall_word`` when the notes added, changed or removed since its last build pass this
#: share of the notes: between builds a word's count is off by at most that share, which moves
#: the hook's rare/common split and its idf estimate a little, never what a note holds
WORD_DRIFT = 0.1


def keep_word_counts(engine, touched: int, force: bool = False, rebuild_ok: bool = True) -> bool:
    """Rebuild ``recall_word`` (every FTS5 token and the number of notes holding it) when there
    is none yet, when ``force``, or when the notes ``touched`` by refreshes since the last build
    exceed :data:`WORD_DRIFT` of the notes; else only add ``touched`` to the tally. True when
    rebuilt. SQLite only (the table stays empty on PostgreSQL: the hook's fallback is SQLite).

    Why a table and not ``fts5vocab`` at query time: fts5vocab counts a token's notes by reading
    its whole posting list, which is what grows with the store; here the scan happens once per
    build (about 0.1 s of CPU a 10,000 notes), off the hook's path. A word missing from the table
    (new since the build) is counted by the hook as before, with a bounded posting read.

    ``rebuild_ok=False`` (``RecallIndex.quick_refresh``, on a search's path): only the tally of
    touched notes grows, so that a reader can bound how far a count may have moved
    (``search._counted_over``); the rebuild waits for the next full refresh."""
    if engine.dialect.name != "sqlite":
        return False
    with engine.begin() as conn:
        meta = dict(
            conn.exec_driver_sql("SELECT k, v FROM recall_meta WHERE k IN (?, ?)", (WORDS_AT, WORDS_STALE)).fetchall()
        )
        stale = int(meta.get(WORDS_STALE) or 0) + max(0, int(touched))
        if not rebuild_ok:  # on a search's path: no count of the notes, no rebuild
            if WORDS_AT not in meta:
                return False  # never built: nothing to keep a tally for
            conn.exec_driver_sql("UPDATE recall_meta SET v = ? WHERE k = ?", (str(stale), WORDS_STALE))
            return False
        notes = int(conn.exec_driver_sql("SELECT count(*) FROM recall_note").scalar() or 0)
        rebuild = force or WORDS_AT not in meta or stale > WORD_DRIFT * max(notes, 1)
        if rebuild:
            conn.exec_driver_sql(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.recall_fts_rows USING fts5vocab(main, recall_fts, row)"
            )
            conn.exec_driver_sql("DELETE FROM recall_word")
            conn.exec_driver_sql("INSERT INTO recall_word (term, docs) SELECT term, doc FROM temp.recall_fts_rows")
            conn.exec_driver_sql("DROP TABLE temp.recall_fts_rows")
            stale = 0
        elif not touched:
            return False
        conn.exec_driver_sql("DELETE FROM recall_meta WHERE k IN (?, ?)", (WORDS_AT, WORDS_STALE))
        conn.exec_driver_sql(
            "INSERT INTO recall_meta (k, v) VALUES (?, ?), (?, ?)", (WORDS_AT, str(notes), WORDS_STALE, str(stale))
        )
    return rebuild
