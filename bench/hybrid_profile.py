"""Where a warm hybrid search spends its time, stage by stage (issue 25: warm hybrid p95 at 100,000).

    PYTHONPATH=. nice .venv/bin/python bench/hybrid_profile.py [--sizes 100000] [--queries 30]
        [--rounds 2] [--code DIR] [--out FILE]

Uses the Zipf store of ``bench/recall_speed.py --store zipf`` (built there, with its synthetic
vectors: run that first) and its queries. Every stage of ``geode.recall.search.search`` is
wrapped by a timer that adds up, per search, the stage's wall time and **its own thread's CPU
time** (``time.thread_time``): the query embedding runs on its worker thread meanwhile, so a
process-wide CPU figure cannot say which stage spent it. Stages nest (``spread_stage>lexical``
is the spread stage's own full-text query, inside ``spread_stage``); a stage's figure includes
the stages inside it. ``embed_query`` is the worker thread's time; ``wait_embedding`` is the
main thread blocked on it (the part of the embedding that the text side did not cover).

Printed per stage: the median and p95 over the searches, and the same for the slowest 10 %
of the searches by wall time (the p95 tail), wall and CPU, in ms. Wrapping costs a few
microseconds a call; the stage figures are for comparing stages and trees, the search's own
latency is ``bench/recall_speed.py``'s.

``--code DIR`` profiles another tree (``git archive <commit> geode | tar -x -C DIR``) with the same
store and queries: the baseline in the same run.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import statistics
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from bench.code_tree import measured_tree  # noqa: E402

CODE = measured_tree()

_local = threading.local()
_acc: dict[str, list[float]] = {}  # stage -> [wall s, cpu s] of the current search


def _timed(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        stack = getattr(_local, "stack", None)
        if stack is None:
            stack = _local.stack = []
        key = ">".join([*stack[-1:], name]) if stack else name
        stack.append(name)
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            stack.pop()
            a = _acc.setdefault(key, [0.0, 0.0])
            a[0] += time.perf_counter() - t0
            a[1] += time.thread_time() - c0

    return wrapper


def _wrap(obj, attr: str, name: str | None = None) -> None:
    import inspect

    fn = getattr(obj, attr, None)
    if fn is None:
        return
    wrapped = _timed(name or attr, fn)
    if isinstance(obj, type) and isinstance(inspect.getattr_static(obj, attr), staticmethod):
        wrapped = staticmethod(wrapped)  # type: ignore[assignment]
    setattr(obj, attr, wrapped)


def instrument() -> None:
    """Wrap the stages of a search where they are looked up (module globals, class attributes)."""
    import concurrent.futures

    from geode.recall import date_terms as dt
    from geode.recall import hits, recall_index, search, spread, vectors

    for attr in (
        "lexical",
        "word_units",
        "term_idf",
        "fuse",
        "neighbour_stage",
        "feedback_stage",
        "_pending_in_scope",
        "_in_a_supersedes_link",
        "snippet_and_line",
        "passage_snippet",
        "supersedes_chain",
        "top_bm25",
        "match_units",
        "match_terms",
        "notes_holding_upto",
        "_notes_of",
        "date_prior",
        "with_question_dates",
        "_coverage",
        "unknown_weight",
    ):
        _wrap(search, attr)
    _wrap(search.Semantic, "scored_passages")
    _wrap(search.Semantic, "_best_metas")
    _wrap(search.Semantic, "_by_note")
    _wrap(vectors.VectorStore, "query", "chroma_query")
    _wrap(vectors.VectorStore, "passage_metadatas", "chroma_metadatas")
    _wrap(recall_index.RecallIndex, "notes_by_ids")
    _wrap(recall_index.RecallIndex, "observations")
    _wrap(recall_index.RecallIndex, "quick_refresh")
    _wrap(spread, "spread_stage")
    _wrap(spread, "answer_line")
    _ = (hits, dt)
    fut_result = concurrent.futures.Future.result

    def result(self, timeout=None):
        if threading.current_thread().name.startswith("geode-query-embed"):
            return fut_result(self, timeout)
        return _timed("wait_embedding", fut_result)(self, timeout)

    concurrent.futures.Future.result = result  # type: ignore[method-assign]


def run(n: int, queries: int, rounds: int) -> dict:
    from bench.recall_speed import OUT, QUERIES, generate_zipf_store
    from geode.kernel.config import load_settings
    from geode.recall import search as S
    from geode.recall.embed import get_embedder

    manifest = generate_zipf_store(n)
    home = os.path.join(OUT, f"zipf-n{n}")
    settings = load_settings(store=manifest["root"], home=home)
    emb = get_embedder(settings)
    _wrap(emb, "embed_query")  # the instance: the worker thread calls it
    rng = random.Random(5)
    qs = [rng.choice(QUERIES) for _ in range(queries)]
    S.search(settings, qs[0], mode="hybrid", embedder=emb)  # warm: model, Chroma, caches
    per: list[dict] = []
    for _r in range(rounds):
        for q in qs:
            _acc.clear()
            c0, t0 = time.process_time(), time.perf_counter()
            res = S.search(settings, q, mode="hybrid", limit=10, embedder=emb)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert res["mode"] == "hybrid" and res["results"], (q, res.get("notice"))
            row = {"query": q, "wall": wall, "cpu": cpu, "stages": {k: tuple(v) for k, v in _acc.items()}}
            per.append(row)
    return summarise(per)


def _stats(values: list[float]) -> dict:
    s = sorted(values)
    p95 = s[max(0, min(len(s) - 1, int(round(0.95 * (len(s) - 1)))))]
    return {"median": round(statistics.median(s) * 1000, 2), "p95": round(p95 * 1000, 2)}


def summarise(per: list[dict]) -> dict:
    slow = sorted(per, key=lambda r: -r["wall"])[: max(1, len(per) // 10)]
    names = sorted({k for r in per for k in r["stages"]})
    out: dict = {
        "searches": len(per),
        "search_wall": _stats([r["wall"] for r in per]),
        "search_cpu": _stats([r["cpu"] for r in per]),
        "slowest_queries": sorted({r["query"] for r in slow}),
        "stages": {},
    }
    for k in names:
        wall = [r["stages"].get(k, (0.0, 0.0))[0] for r in per]
        cpu = [r["stages"].get(k, (0.0, 0.0))[1] for r in per]
        swall = [r["stages"].get(k, (0.0, 0.0))[0] for r in slow]
        scpu = [r["stages"].get(k, (0.0, 0.0))[1] for r in slow]
        out["stages"][k] = {
            "wall": _stats(wall),
            "cpu": _stats(cpu),
            "slowest_wall_mean": round(statistics.mean(swall) * 1000, 2),
            "slowest_cpu_mean": round(statistics.mean(scpu) * 1000, 2),
        }
    by_query: dict[str, list[float]] = {}
    for r in per:
        by_query.setdefault(r["query"], []).append(r["cpu"])
    out["cpu_median_by_query"] = {
        q: round(statistics.median(v) * 1000, 1) for q, v in sorted(by_query.items(), key=lambda kv: -max(kv[1]))
    }
    out["per_search"] = [
        {
            "query": r["query"],
            "wall_ms": round(r["wall"] * 1000, 2),
            "cpu_ms": round(r["cpu"] * 1000, 2),
            "stages_cpu_ms": {k: round(v[1] * 1000, 2) for k, v in r["stages"].items() if v[1] >= 0.0005},
        }
        for r in per
    ]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100000")
    p.add_argument("--queries", type=int, default=30)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--code", default=REPO)
    p.add_argument("--out", default="")
    a = p.parse_args(argv)
    instrument()
    res = {"code": CODE, "load_before": os.getloadavg(), "sizes": []}
    for n in [int(x) for x in a.sizes.split(",")]:
        res["sizes"].append({"notes": n, **run(n, a.queries, a.rounds)})
    res["load_after"] = os.getloadavg()
    text = json.dumps(res, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
