"""A filtered search answers as the exact filtered ranking (issue 25, a tag filter of any width).

The fast ways a filter takes (the text side's top-k bound inside the scope, one Chroma query
sized by the scope's share and checked against the scope's ids in memory) must rank exactly as
the reference does: the text side as the one joined query (every note the match holds, filtered,
scored), the semantic side as the exact read of every passage in scope. On a store of 2,000
notes with real Chroma vectors (seeded, one per note) and tags on about 50%, 23%, 5% and 1.5% of
the notes, the top 5 of ``search`` (hybrid, with the neighbour and spread stages) is the same,
note for note and score for score, both ways; and the semantic side alone is the brute-force
best n over the scope's stored vectors.
"""

from __future__ import annotations

import hashlib
import math
import os

import numpy as np
import pytest

from geode.kernel.config import load_settings
from geode.recall import search as S
from geode.recall.filters import as_where, filter_where
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import forget_term_stats, search
from geode.recall.vectors import VectorStore, WriterLock, vector_id
from tests.stores import note, write

N = 2000
DIM = 16
WORDS = "retry queue payment disk docker token cache build deploy config alert worker".split()
RARE = "zeppelin quasar backoff mismatch".split()
TAGS = {"half": 2, "quarter": 13 / 3, "few": 20, "rare": 67}  # one note in k holds the tag
QUERIES = [
    "retry queue payment",
    "docker build cache",
    "token deploy zeppelin",
    "alert worker backoff",
    "disk config mismatch quasar",
    "queue",
]


class HashEmbedder:
    """A deterministic unit vector per text: the ranking is compared, not what it means."""

    model_id = "test/exact-hash"
    dim = DIM

    def embed_query(self, text: str):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
        v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        return v / np.linalg.norm(v)


def _note(i: int) -> str:
    rng = np.random.default_rng(i)
    tags = [t for t, k in TAGS.items() if math.floor(i / k) != math.floor((i - 1) / k)]
    words = list(rng.choice(WORDS, size=int(rng.integers(4, 30))))
    if i % 9 == 0:
        words.append(str(rng.choice(RARE)))
    return note(f"Note {i}: {' '.join(words)}.", tags=tags or ["none"])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    base = tmp_path_factory.mktemp("exact")
    root, home = base / "notes", base / "home"
    for i in range(N):
        write(root, f"d{i % 20}/n{i}.md", _note(i))
    home.mkdir()
    (home / "geode.toml").write_text(f'[domains]\nkb = "{root}"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEODE_")}
    settings = load_settings(home=str(home), env=env)
    idx = RecallIndex(settings)
    idx.refresh()
    emb = HashEmbedder()
    with idx.sql.connect() as conn:
        notes = conn.all("SELECT domain, path FROM recall_note ORDER BY id")
    lock = WriterLock(settings)
    assert lock.acquire(60)
    try:
        vs = VectorStore(settings, emb.model_id, emb.dim, write=True)
        v = np.random.default_rng(3).standard_normal((len(notes), DIM)).astype(np.float32)
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        vs.upsert([vector_id(d, p) for d, p in notes], v, [{"domain": d, "path": p} for d, p in notes])
        with idx.writer.begin() as conn:
            conn.exec_driver_sql(
                "UPDATE recall_note SET embed_model = ?, embed_hash = embed_text_hash", (emb.model_id,)
            )
    finally:
        lock.release()
    yield settings, emb, idx
    dispose_engines()


def _joined_lexical(idx, terms, conds, n, filtered=True):
    """The reference text side: the one joined query over every note the match holds."""
    w = as_where(conds)
    with idx.sql.connect() as conn:
        units = S.flat_units(S.match_units(idx, conn, terms))
        kept = sorted(S.match_terms(idx, conn, units), key=lambda t: S.doc_freq(idx, conn, t))
        fw = S.FTS_WEIGHTS
        bm = f"bm25(recall_fts, {fw[0]}, {fw[1]}, {fw[2]}, {fw[3]})"
        sql = (
            f"SELECT recall_fts.rowid, {bm} AS s FROM recall_fts JOIN recall_note ON recall_note.id = "
            f"recall_fts.rowid + 0 WHERE recall_fts MATCH :q AND {w.sql} ORDER BY s LIMIT :n"
        )
        rows = conn.all(sql, {**w.params, "q": S.fts5_query(kept), "n": n})
    return {int(i): -float(s) for i, s in rows}


def _top(res) -> list[tuple[str, float]]:
    return [(h["path"], h["score"]) for h in res["results"]]


@pytest.mark.parametrize("tag", list(TAGS))
def test_a_filtered_hybrid_top5_is_the_exact_filtered_ranking(store, tag, monkeypatch):
    settings, emb, idx = store
    share = len([i for i in range(N) if tag in _note(i).split("---")[1]]) / N
    assert 0.01 < share < 0.6
    monkeypatch.setattr(S, "EXACT_SEMANTIC_MAX", 0)  # every scope by Chroma's nearest passages
    monkeypatch.setattr(S, "EXACT_SEMANTIC_WARM_MAX", 0)
    fast = []
    for q in QUERIES:
        forget_term_stats(idx)
        fast.append(_top(search(settings, q, tags=[tag], limit=5, index=idx, embedder=emb, refresh=False)))
    monkeypatch.setattr(S, "EXACT_SEMANTIC_MAX", 10 * N)  # the exact read of every passage in scope
    monkeypatch.setattr(S, "EXACT_SEMANTIC_WARM_MAX", 10 * N)
    monkeypatch.setattr(S, "lexical", _joined_lexical)  # and the one joined text query
    for q, got in zip(QUERIES, fast, strict=True):
        forget_term_stats(idx)
        want = _top(search(settings, q, tags=[tag], limit=5, index=idx, embedder=emb, refresh=False))
        assert len(want) == 5, (q, want)
        assert got == want, (tag, q)


@pytest.mark.parametrize("tag", list(TAGS))
def test_the_semantic_side_of_a_scope_is_the_brute_force_best(store, tag, monkeypatch):
    """Chroma's nearest passages, asked once by the scope's share, hold the best n notes of the
    scope exactly as every stored vector of the scope compared with the query does."""
    settings, emb, idx = store
    monkeypatch.setattr(S, "EXACT_SEMANTIC_MAX", 0)
    monkeypatch.setattr(S, "EXACT_SEMANTIC_WARM_MAX", 0)
    sem = S.semantic_for(settings, emb)
    w, _doms = filter_where(settings, tags=[tag])
    with idx.sql.connect() as conn:
        scope = dict(conn.all(f"SELECT recall_note.id, recall_note.path FROM recall_note WHERE {w.sql}", w.params))
    stored = sem.vs.col.get(include=["embeddings", "metadatas"])
    vec = {
        m["path"]: np.asarray(e, dtype=np.float32)
        for e, m in zip(stored["embeddings"], stored["metadatas"], strict=True)
    }
    for q in QUERIES:
        qv = emb.embed_query(q)
        cos = {i: float(vec[p] @ qv / np.linalg.norm(vec[p])) for i, p in scope.items()}
        want = sorted(cos, key=lambda i: -cos[i])[:50]
        got, _best = sem.scored_passages(idx, q, w, 50, True)
        assert sorted(got, key=lambda i: -got[i]) == want, (tag, q)
        assert all(abs(got[i] - cos[i]) < 1e-5 for i in want)


def test_a_scope_asks_chroma_once_sized_by_its_share(store, monkeypatch):
    """A 23% tag is one Chroma query of ``ANN_MARGIN x k / share`` passages (before: ``k``, then
    ``8 k`` when too few of them were in scope), and its candidates are checked in memory: no SQL
    read with a list of candidate ids follows it."""
    settings, emb, idx = store
    monkeypatch.setattr(S, "EXACT_SEMANTIC_MAX", 0)
    monkeypatch.setattr(S, "EXACT_SEMANTIC_WARM_MAX", 0)
    sem = S.semantic_for(settings, emb)
    asked: list[int] = []
    real = sem.vs.query

    def query(qv, k, metas=False):
        asked.append(k)
        return real(qv, k, metas=metas)

    monkeypatch.setattr(sem.vs, "query", query)
    w, _doms = filter_where(settings, tags=["quarter"])
    forget_term_stats(idx)
    with idx.sql.connect() as conn:
        share = S._notes_in_scope(idx, conn, w) / N
    k = 50 * S.PASSAGES_PER_NOTE
    got, _best = sem.scored_passages(idx, "retry queue payment", w, 50, True)
    assert len(got) == 50
    assert asked == [math.ceil(S.ANN_MARGIN * k / share)]


def test_a_note_embedded_after_a_scope_was_read_is_compared_in_the_next_search(store, monkeypatch):
    """The exact read keeps a scope's rows between searches (``search._scope_rows``); a note of
    the scope that was waiting for its vector and gets it (no change to its text, so the full-text
    index stays the same) is compared in the next search: the kept rows go with the scope's count
    of waiting notes."""
    settings, emb, idx = store
    monkeypatch.setattr(S, "EXACT_SEMANTIC_MAX", 10 * N)
    sem = S.semantic_for(settings, emb)
    w, _doms = filter_where(settings, tags=["rare"])
    q = "alert worker backoff"
    first, _best = sem.scored_passages(idx, q, w, 5, True)
    top = max(first, key=lambda i: first[i])
    with idx.sql.connect() as conn:
        d, p, h = conn.all("SELECT domain, path, embed_hash FROM recall_note WHERE id = :i", {"i": top})[0]
    vid = vector_id(d, p)
    stored = sem.vs.col.get(ids=[vid], include=["embeddings", "metadatas"])
    lock = WriterLock(settings)
    assert lock.acquire(60)
    try:
        writer = VectorStore(settings, emb.model_id, emb.dim, write=True)
        writer.delete([vid])  # the note waits for its vector
        with idx.writer.begin() as conn:
            conn.exec_driver_sql("UPDATE recall_note SET embed_hash = NULL WHERE id = ?", (top,))
        waiting, _best = sem.scored_passages(idx, q, w, 5, True)
        assert top not in waiting
        writer.upsert([vid], stored["embeddings"], [dict(stored["metadatas"][0])])  # and gets it
        with idx.writer.begin() as conn:
            conn.exec_driver_sql("UPDATE recall_note SET embed_hash = ? WHERE id = ?", (h, top))
    finally:
        lock.release()
    again, _best = sem.scored_passages(idx, q, w, 5, True)
    assert max(again, key=lambda i: again[i]) == top
