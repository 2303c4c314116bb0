"""Vectors are written to Chroma in batches sized for its engine (issue 25): an upsert has a fixed
cost, so geode writes ``WRITE_BATCH`` passages at a time (at most the client's ``max_batch_size``)
rather than one upsert per embedding batch of 32 notes; a note is marked embedded only once its
vectors are written. Real Chroma (the embedded engine); the embedder is a fake that returns seeded
vectors, because what is tested is the writing, not the model."""

from __future__ import annotations

import numpy as np
import pytest

import geode.recall.vectors as vectors
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from tests.stores import GeodeEnv, write


class SeededEmbedder:
    model_id = "fake-seeded"
    dim = 16
    runtime = "fake"
    device = "cpu"

    def __init__(self):
        self.rng = np.random.default_rng(5)

    def embed_passages(self, texts):
        v = self.rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("GEODE_HOME", str(tmp_path / "home"))
    e = GeodeEnv(tmp_path, root="notes", env=None)
    for i in range(300):
        write(e.root, f"f{i // 100}/n{i:03d}.md", f"---\ntitle: note {i}\n---\nBody of note {i} about topic {i % 7}.\n")
    s = e.load_settings()
    RecallIndex(s).refresh()
    yield s
    dispose_engines()


def test_pending_notes_are_written_in_batches_sized_for_chroma(settings, monkeypatch):
    sizes: list[int] = []
    real = vectors.VectorStore.upsert

    def counting(self, ids, vecs, metas):
        sizes.append(len(ids))
        return real(self, ids, vecs, metas)

    monkeypatch.setattr(vectors, "WRITE_BATCH", 128, raising=False)
    monkeypatch.setattr(vectors, "WRITE_WAIT_S", 3600.0, raising=False)  # by size only, whatever the load
    monkeypatch.setattr(vectors.VectorStore, "upsert", counting)
    r = vectors.embed_pending(settings, embedder=SeededEmbedder(), batch=32)
    assert r["embedded"] == 300 and r["passages"] >= 300
    # 300 passages or more: full batches of 128, then the rest; never one upsert per 32 notes
    assert sum(sizes) >= 300 and max(sizes) <= 128, sizes
    assert len(sizes) <= -(-sum(sizes) // 128) + 2, sizes  # ceil(total / 128), plus at most the tail's split
    assert len(sizes) < 300 // 32, sizes
    vs = vectors.VectorStore(settings, "fake-seeded", 16)
    assert vs.note_count() == 300
    assert RecallIndex(settings).pending("fake-seeded") == []  # every note marked, after its write


def test_a_write_that_fails_leaves_the_buffered_notes_pending(settings, monkeypatch):
    calls = {"n": 0}
    real = vectors.VectorStore.upsert

    def second_fails(self, ids, vecs, metas):
        calls["n"] += 1
        if calls["n"] == 2:
            raise vectors.VectorsUnavailable("the Chroma folder went away (test)")
        return real(self, ids, vecs, metas)

    monkeypatch.setattr(vectors, "WRITE_BATCH", 128, raising=False)
    monkeypatch.setattr(vectors, "WRITE_WAIT_S", 3600.0, raising=False)  # by size only, whatever the load
    monkeypatch.setattr(vectors.VectorStore, "upsert", second_fails)
    with pytest.raises(vectors.VectorsUnavailable):
        vectors.embed_pending(settings, embedder=SeededEmbedder(), batch=32)
    pending = RecallIndex(settings).pending("fake-seeded")
    vs = vectors.VectorStore(settings, "fake-seeded", 16)
    written = vs.note_count()
    assert 0 < written < 300 and len(pending) == 300 - written, (written, len(pending))


def test_a_new_collection_syncs_at_least_once_per_write_batch(settings):
    """A guard (it passes on the code before too): Chroma's local engine re-reads its log from the
    last synced write on every write, so a ``hnsw:sync_threshold`` above a write batch makes each
    write re-read the writes before it (11x slower per CPU second at 100,000 vectors with a threshold
    of 200,000, bench/RECALL.md); geode's collections keep a threshold no larger than a batch."""
    lock = vectors.WriterLock(settings)
    assert lock.acquire(5)
    try:
        vs = vectors.VectorStore(settings, "fake-seeded", 16, write=True)
        hnsw = vs.col.configuration.get("hnsw") or {}
    finally:
        lock.release()
    assert hnsw.get("space") == "cosine"
    assert 0 < int(hnsw["sync_threshold"]) <= vectors.WRITE_BATCH, hnsw
