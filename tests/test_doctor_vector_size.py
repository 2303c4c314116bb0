"""``geode doctor`` says when the local vector collection is past the size where the embedded
Chroma engine's inserts slow, and names the server mode (``[recall] chroma_url``); below that
size, or with a server configured, it says nothing (issue 25). Real Chroma on disk, real doctor."""

from __future__ import annotations

import numpy as np
import pytest

import geode.recall.vectors as vectors
from geode.recall.index_tables import dispose_engines
from geode.services import doctor, doctor_vector_size
from tests.stores import GeodeEnv, write


def _fill(settings, n: int) -> None:
    """``n`` passages in the model's collection, written as geode writes them (under the lock)."""
    lock = vectors.WriterLock(settings)
    assert lock.acquire(5)
    try:
        vs = vectors.VectorStore(settings, "fake-size", 8, write=True)
        v = np.random.default_rng(3).standard_normal((n, 8)).astype(np.float32)
        ids = [vectors.passage_id("main", f"n{i:03d}.md", 0) for i in range(n)]
        metas = [{"domain": "main", "path": f"n{i:03d}.md", "passage": 0} for i in range(n)]
        vs.upsert(ids, v, metas)
    finally:
        lock.release()


@pytest.fixture
def env(tmp_path):
    e = GeodeEnv(tmp_path, root="notes")
    for i in range(3):
        write(e.root, f"n{i}.md", f"---\ntitle: note {i}\n---\nBody {i}.\n")
    yield e
    dispose_engines()


def test_past_the_size_doctor_names_the_server_mode(env, monkeypatch):
    monkeypatch.setattr(doctor_vector_size, "LOCAL_ENGINE_SLOWS", 50)
    _fill(env.settings, 60)
    ok, examined, message = doctor_vector_size.vector_size_check(env.settings)
    assert ok  # advice, not a failure: search works at any size
    assert examined["vectors"] == 60 and examined["past"] == 50
    assert "[recall] chroma_url" in message and "60 passages" in message
    checks = {c["name"]: c for c in doctor.doctor_checks(env.settings, skip_model=True)}
    assert checks["vector-size"]["examined"]["vectors"] == 60, sorted(checks)


def test_below_the_size_or_with_a_server_doctor_says_nothing(env, monkeypatch):
    monkeypatch.setattr(doctor_vector_size, "LOCAL_ENGINE_SLOWS", 50)
    assert doctor_vector_size.vector_size_check(env.settings) is None  # nothing built yet
    _fill(env.settings, 40)
    assert doctor_vector_size.vector_size_check(env.settings) is None
    _fill(env.settings, 60)  # the same 40 ids again and 20 more
    assert doctor_vector_size.vector_size_check(env.settings) is not None
    served = GeodeEnv(env.base, root="notes", env={"GEODE_CHROMA_URL": "http://127.0.0.1:9"}).load_settings()
    assert doctor_vector_size.vector_size_check(served) is None  # the vectors live on a server already
