"""One HNSW graph for every process: what Chroma's ``sync_threshold`` costs and buys.

    PYTHONPATH=. nice .venv/bin/python bench/vector_one_graph.py [--sizes 1000,20000] [--queries 30] [--json OUT]

For each size, two fresh local Chroma folders (each in its own process, as a geode process opens one) are filled the way geode writes (``WRITE_BATCH``
vectors per upsert, then a partial batch of 500), one with Chroma's default threshold (1,000:
what geode created before) and one with ``vectors.SYNC_THRESHOLD`` through ``VectorStore`` (the
settling delete included). Measured, per folder, in the same run:

- **agreement**: the writer's top 10 for each of ``--queries`` query vectors against the top 10
  of two fresh reader processes (``chroma_lite``, as a cold ``geode search`` reads); how many
  queries differ, and the log records the HNSW segment left unsaved;
- **small writes**: the median wall time of 15 writes of 3 vectors and 15 writes of 1 vector to
  the filled collection (each write as ``VectorStore.upsert`` makes it: with the new threshold a
  write saves the graph, which is the cost).

The vectors are text-like (clustered unit vectors, 384 dimensions: many near neighbours), seeded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

DIM = 384
TOP = 10

READER = r"""
import json, sys
from geode.recall.chroma_lite import LiteClient
folder, name, qfile = sys.argv[1:4]
col = LiteClient(folder).collection_or_none(name)
qs = json.load(open(qfile))
print(json.dumps([col.query([q], %d)["ids"][0] for q in qs]))
""".replace("%d", str(TOP))


def clustered(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(25, n // 60), DIM))
    v = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.standard_normal((n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def unsaved(folder: str) -> int:
    import sqlite3

    con = sqlite3.connect(f"file:{os.path.join(folder, 'chroma.sqlite3')}?mode=ro", uri=True)
    try:
        saved = con.execute(
            "SELECT m.seq_id FROM segments s JOIN max_seq_id m ON m.segment_id = s.id WHERE s.scope = 'VECTOR'"
        ).fetchone()
        last = con.execute("SELECT max(seq_id) FROM embeddings_queue").fetchone()
    finally:
        con.close()
    return int(last[0] or 0) - int(saved[0] if saved else 0)


class Store:
    """A filled collection in ``folder``, written through ``VectorStore`` (``low``) or through
    chromadb with its default threshold (the geode before)."""

    def __init__(self, folder: str, low: bool):
        import geode.recall.vectors as V
        from geode.kernel.config import load_settings

        self.folder = folder
        self.low = low
        home = os.path.join(folder, "home")
        os.makedirs(home, exist_ok=True)
        self.settings = load_settings(store=os.path.join(folder, "store"), home=home, env={})
        self.name = V.collection_name("bench", DIM)
        self.chroma = V.new_folder(self.settings)
        os.makedirs(self.chroma)
        V.switch_to(self.settings, self.chroma)
        if low:
            self.vs = V.VectorStore(self.settings, "bench", DIM, write=True)
            self.col = self.vs.col
        else:
            import chromadb
            from chromadb.config import Settings

            client = chromadb.PersistentClient(path=self.chroma, settings=Settings(anonymized_telemetry=False))
            self.col = client.get_or_create_collection(
                self.name, embedding_function=None, metadata={"hnsw:space": "cosine"}
            )

    def write(self, ids, vecs) -> None:
        if self.low:
            self.vs.upsert(ids, vecs, [{"domain": "d", "path": i} for i in ids])
        else:
            self.col.upsert(
                ids=ids, embeddings=vecs.astype(float).tolist(), metadatas=[{"domain": "d", "path": i} for i in ids]
            )


def one(size: int, low: bool, queries, tmp: str) -> dict:
    import geode.recall.vectors as V

    folder = tempfile.mkdtemp(dir=tmp)
    st = Store(folder, low)
    vecs = clustered(size + 500, size)
    n = 0
    batches = [(s, min(s + V.WRITE_BATCH, size)) for s in range(0, size, V.WRITE_BATCH)] + [(size, size + 500)]
    t0 = time.perf_counter()
    for a, b in batches:
        st.write([f"d:p{i:07d}.md#0" for i in range(a, b)], vecs[a:b])
        n += b - a
    fill_s = time.perf_counter() - t0
    mine = [st.col.query(query_embeddings=[q.astype(float).tolist()], n_results=TOP)["ids"][0] for q in queries]
    left = unsaved(st.chroma)
    qfile = os.path.join(folder, "q.json")
    with open(qfile, "w") as fh:
        json.dump(queries.astype(float).tolist(), fh)
    differ = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", READER, st.chroma, st.name, qfile],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": REPO},
        )
        if out.returncode:
            raise SystemExit(out.stderr[-2000:])
        theirs = json.loads(out.stdout.strip().splitlines()[-1])
        differ.append(sum(1 for a, b in zip(mine, theirs, strict=True) if a != b))
    small = {}
    extra = clustered(60, size + 7)
    k = 0
    for width in (3, 1):
        times = []
        for _ in range(15):
            ids = [f"d:x{k + j:05d}.md#0" for j in range(width)]
            t = time.perf_counter()
            st.write(ids, extra[k % 45 : k % 45 + width])
            times.append((time.perf_counter() - t) * 1000)
            k += width
        small[f"write_{width}_ms"] = round(statistics.median(times), 1)
    shutil.rmtree(folder, ignore_errors=True)
    return {
        "size": n,
        "threshold": V.SYNC_THRESHOLD if low else 1000,
        "fill_s": round(fill_s, 2),
        "unsaved_after_fill": left,
        "queries": len(queries),
        "differ_per_reader": differ,
        **small,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,20000")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--one", nargs=2, metavar=("SIZE", "LOW"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:  # one folder in this process, as a geode process opens one
        size, low = int(a.one[0]), a.one[1] == "1"
        tmp = tempfile.mkdtemp(prefix="one-graph-")
        try:
            print(json.dumps(one(size, low, clustered(a.queries, 99 + size), tmp)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores)")
    rows = []
    for size in [int(s) for s in a.sizes.split(",")]:
        for low in (False, True):
            out = subprocess.run(
                [sys.executable, __file__, "--queries", str(a.queries), "--one", str(size), "1" if low else "0"],
                capture_output=True,
                text=True,
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": REPO},
            )
            if out.returncode:
                raise SystemExit(out.stderr[-3000:])
            r = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(r)
            print(
                f"{r['size']:>7} vectors  threshold {r['threshold']:>4}  unsaved {r['unsaved_after_fill']:>4}  "
                f"queries differing per reader {r['differ_per_reader']} of {r['queries']}  "
                f"write of 3: {r['write_3_ms']} ms  of 1: {r['write_1_ms']} ms  (fill {r['fill_s']} s)",
                flush=True,
            )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
