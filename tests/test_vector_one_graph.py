"""Every process that opens a store reads one HNSW graph (issues 25 and 26: warm equals cold).

Chroma's local engine saves its graph only every ``sync_threshold`` log records; what is not saved
stays in the log and every process that opens the folder rebuilds that tail in parallel, each a
little differently. geode wrote 1,000 passages at a time against the default threshold of 1,000,
so a store's last partial batch was never saved, and a warm search (the writer's process) and a
cold one (a fresh reader) answered different nearest neighbours for the same query vector.

Real Chroma, real processes: the writer is this test's process, each reader a fresh Python
process opening the folder the way a cold ``geode search`` does (``use_lite_reader``). The
vectors are seeded and clustered (text-like: many near neighbours, where a graph's small
differences show); what is tested is the engine's state, not a model.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

import geode.recall.vectors as vectors
from geode.recall.index_tables import dispose_engines
from tests.stores import GeodeEnv

MODEL, DIM = "fake-clustered", 48
QUERIES = 60
TOP = 20

READER = r"""
import json, sys
from geode.kernel.config import load_settings
import geode.recall.vectors as vectors
store, home, model, dim, qfile, top = sys.argv[1:7]
vectors.use_lite_reader(True)
s = load_settings(store=store, home=home, env={})
vs = vectors.VectorStore(s, model, int(dim))
qs = json.load(open(qfile))
print(json.dumps({"lite": type(vs.col).__name__, "count": vs.count(),
                  "top": [[i for i, _ in vs.query(q, int(top))] for q in qs]}))
"""


OLD_BUILD = r"""
import sys, numpy as np, chromadb
from chromadb.config import Settings
folder, name, vecs = sys.argv[1:4]
col = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False)).get_or_create_collection(
    name, embedding_function=None, metadata={"hnsw:space": "cosine"})
v = np.load(vecs)
for start in (0, 1000):  # as geode wrote: a batch of 1,000, then the rest
    ids = [f"d:n{i:05d}.md#0" for i in range(start, min(start + 1000, len(v)))]
    col.upsert(ids=ids, embeddings=v[start : start + 1000].astype(float).tolist())
print(col.configuration["hnsw"]["sync_threshold"])
"""


def clustered(n: int, seed: int) -> np.ndarray:
    """``n`` unit vectors around 25 centres (text-like: dense neighbourhoods)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((25, DIM))
    v = centres[rng.integers(0, 25, n)] + 0.35 * rng.standard_normal((n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def env(tmp_path):
    e = GeodeEnv(tmp_path, env={})
    yield e
    dispose_engines()


def write_passages(vs: vectors.VectorStore, vecs: np.ndarray, first: int = 0) -> None:
    """Upsert ``vecs`` as geode's writer does: ``WRITE_BATCH`` at a time."""
    for start in range(0, len(vecs), vectors.WRITE_BATCH):
        chunk = vecs[start : start + vectors.WRITE_BATCH]
        ids = [vectors.passage_id("d", f"n{first + start + i:05d}.md", 0) for i in range(len(chunk))]
        vs.upsert(ids, chunk, [{"domain": "d", "path": ids[i].split(":", 1)[1][:-2]} for i in range(len(chunk))])


#: Chroma's ``embeddings_queue.operation`` for a delete (chromadb.types.Operation.DELETE)
DELETE = 3


def unsaved(folder: str) -> list[tuple[int, str]]:
    """(operation, id) of the log records the HNSW segment has not saved: the rows of Chroma's
    queue past the sequence number that segment saved (what a fresh process rebuilds)."""
    con = sqlite3.connect(f"file:{os.path.join(folder, 'chroma.sqlite3')}?mode=ro", uri=True)
    try:
        saved = con.execute(
            "SELECT m.seq_id FROM segments s JOIN max_seq_id m ON m.segment_id = s.id WHERE s.scope = 'VECTOR'"
        ).fetchone()
        n = con.execute("SELECT count(*) FROM embeddings_queue").fetchone()[0]
        rows = con.execute(
            "SELECT operation, id FROM embeddings_queue WHERE seq_id > ? ORDER BY seq_id", (saved[0] if saved else 0,)
        ).fetchall()
    finally:
        con.close()
    assert n, "no log at all: nothing was written"
    return [(int(op), str(i)) for op, i in rows]


def unsaved_changes(folder: str) -> list[tuple[int, str]]:
    """``unsaved`` less the settling deletes (of an id no graph holds: every reader applies them
    alike)."""
    return [r for r in unsaved(folder) if r != (DELETE, vectors.SETTLE_ID)]


def reader_tops(env: GeodeEnv, queries: np.ndarray, tmp) -> dict:
    qfile = tmp / "queries.json"
    qfile.write_text(json.dumps(queries.astype(float).tolist()))
    out = subprocess.run(
        [sys.executable, "-c", READER, str(env.root), str(env.home), MODEL, str(DIM), str(qfile), str(TOP)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def writer_tops(vs: vectors.VectorStore, queries: np.ndarray) -> list[list[str]]:
    return [[i for i, _ in vs.query(q, TOP)] for q in queries]


def test_a_partial_last_batch_is_saved_and_every_reader_finds_the_writers_neighbours(env, tmp_path):
    """1,500 passages (one full batch, then 500): the 500 were left in the log before (the
    threshold was 1,000), so this fails on the code before on the saved state, and the writer
    and fresh readers disagreed on several of 20 queries."""
    s = env.settings
    lock = vectors.WriterLock(s)
    assert lock.acquire(5)
    try:
        vs = vectors.VectorStore(s, MODEL, DIM, write=True)
        write_passages(vs, clustered(1500, 1))
        assert vs.count() == 1500
        assert unsaved(vs.folder) == [], "the last batch stayed in the log"
        queries = clustered(QUERIES, 2)
        mine = writer_tops(vs, queries)
        assert all(len(t) == TOP for t in mine), mine
        for _ in range(2):
            got = reader_tops(env, queries, tmp_path)
            assert got["lite"] == "LiteCollection" and got["count"] == 1500, got
            differ = [k for k in range(QUERIES) if got["top"][k] != mine[k]]
            assert not differ, f"the reader's top {TOP} differs on queries {differ}"
    finally:
        lock.release()


def test_a_one_record_write_and_a_one_record_delete_are_saved(env):
    """One record is below the threshold of 2: the writer adds the settling delete, so nothing
    stays in the log for a reader to rebuild its own way."""
    s = env.settings
    lock = vectors.WriterLock(s)
    assert lock.acquire(5)
    try:
        vs = vectors.VectorStore(s, MODEL, DIM, write=True)
        write_passages(vs, clustered(40, 3))
        assert unsaved(vs.folder) == []
        write_passages(vs, clustered(1, 4), first=40)
        assert vs.count() == 41 and unsaved(vs.folder) == []
        vs.delete([vectors.passage_id("d", "n00003.md", 0)])
        assert vs.count() == 40 and unsaved(vs.folder) == []
        # the settling delete removed nothing: every passage written and not deleted is there
        ids = set(vs.all_ids())
        assert len(ids) == 40 and vectors.passage_id("d", "n00040.md", 0) in ids and vectors.SETTLE_ID not in ids
    finally:
        lock.release()


def test_a_collection_built_with_chromas_default_is_moved_to_the_low_threshold_by_its_next_writer(env, tmp_path):
    """A store built before this change has Chroma's default threshold (1,000) and an unsaved
    tail: its next writer lowers the threshold before writing, and one write saves the graph
    (fails on the code before: the threshold stayed 1,000 and the tail grew)."""
    s = env.settings
    folder = vectors.new_folder(s)
    os.makedirs(folder)
    vecs = tmp_path / "old.npy"
    np.save(vecs, clustered(1300, 5))
    # built in its own process, as the geode before this change left a store (a process that has
    # loaded a collection keeps the threshold it loaded it with)
    out = subprocess.run(
        [sys.executable, "-c", OLD_BUILD, folder, vectors.collection_name(MODEL, DIM), str(vecs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1000"], out.stdout
    assert len(unsaved_changes(folder)) == 300, "the fixture must start with an unsaved tail"
    vectors.switch_to(s, folder)

    lock = vectors.WriterLock(s)
    assert lock.acquire(5)
    try:
        vs = vectors.VectorStore(s, MODEL, DIM, write=True)
        assert int(vs.col.configuration["hnsw"]["sync_threshold"]) == vectors.SYNC_THRESHOLD
        write_passages(vs, clustered(1, 6), first=1300)
        # the tail it found was saved by that write; what may stay is the settling delete
        assert unsaved_changes(vs.folder) == [] and len(unsaved(vs.folder)) <= 1, unsaved(vs.folder)
        queries = clustered(QUERIES, 7)
        mine = writer_tops(vs, queries)
        got = reader_tops(env, queries, tmp_path)
        assert got["count"] == 1301
        assert [k for k in range(QUERIES) if got["top"][k] != mine[k]] == []
    finally:
        lock.release()
