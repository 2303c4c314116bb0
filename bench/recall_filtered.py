"""Warm search with filters at 100,000 notes (issue 10, speed): latency by filter width.

    PYTHONPATH=. .venv/bin/python bench/recall_filtered.py [--code DIR] [--queries 20] [--rounds 3]

Uses the Zipf store and the index ``bench/recall_speed.py --store zipf --sizes 100000`` built
(``bench/out/recall/zipf-n100000``, with its synthetic vectors; run that first). In one process,
warm (the first query of each case is discarded): unfiltered hybrid ``--rounds`` times (the
steady state), then hybrid and text with filters that select every note (``type``, ``after``,
``where $ne``), tags that select about 23%, 5.5% and 4.3% of the notes and any of six tags
(49.5%): median and p95 wall ms,
and the three slowest queries of the unfiltered rounds. ``--code DIR`` measures another tree of
geode (``git archive <commit> geode | tar -x -C DIR``) on the same index.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(REPO)
from bench.code_tree import measured_tree  # noqa: E402

CODE = measured_tree()
import geode.recall.search as S  # noqa: E402  (the tree measured, before bench's own imports)
from bench.recall_speed import OUT, QUERIES, generate_zipf_store  # noqa: E402

TAGS = ("mife", "bodelo", "mifexa")  # the Zipf store's tags on ~23%, ~5.5% and ~4.3% of the notes
#: the six commonest tags: a note holding any of them is one of 49,460 of 100,000 (49.5%)
HALF = ["mife", "papago", "simi", "bodelo", "mifexa", "pahitami"]


def timed(settings, queries: list[str], **kw) -> list[tuple[float, str]]:
    S.search(settings, queries[0], **kw)  # warm this case (its counts, its caches)
    out = []
    for q in queries:
        c0, t0 = time.process_time(), time.perf_counter()
        res = S.search(settings, q, **kw)
        out.append(((time.perf_counter() - t0) * 1000, q))
        CPU.append((time.process_time() - c0) * 1000)
        assert res["results"], (kw, q)  # a case that finds nothing measures nothing
    return sorted(out)


#: this process's CPU ms per search of the last case (every thread: SQLite, Chroma's engine, the
#: model): what a loaded machine still measures when the wall time measures the neighbours
CPU: list[float] = []


def line(label: str, ts: list[tuple[float, str]]) -> str:
    ms = [t for t, _q in ts]
    p95 = ms[max(0, int(0.95 * len(ms)) - 1)]
    cpu = f"  cpu median {statistics.median(CPU):6.1f}" if CPU else ""
    CPU.clear()
    return f"{label:<34} median {statistics.median(ms):7.1f}  p95 {p95:7.1f} ms{cpu}  (n={len(ms)})"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--code", default=None, help="another tree of geode to measure")
    p.add_argument("--queries", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default="hybrid,text", help="the modes measured per filter")
    p.add_argument("--home", default=None, help="another copy of the index's home (default: zipf-n100000)")
    a = p.parse_args(argv)
    from geode.kernel.config import load_settings

    home = a.home or os.path.join(OUT, "zipf-n100000")
    if not os.path.exists(os.path.join(home, "geode.db")):
        sys.exit(f"{home}: no index; build it with bench/recall_speed.py --store zipf --sizes 100000")
    manifest = generate_zipf_store(100000)
    settings = load_settings(store=manifest["root"], home=home)
    rng = random.Random(5)
    qs = [rng.choice(QUERIES) for _ in range(a.queries)]
    print(f"tree {CODE}, home {home}, load {os.getloadavg()}")
    base: list[float] = []
    base_cpu: list[float] = []
    for r in range(a.rounds):
        ts = timed(settings, qs)
        base.append(statistics.median(t for t, _q in ts))
        base_cpu.append(statistics.median(CPU))
        print(line(f"hybrid, no filter, round {r + 1}", ts), [(round(t), q) for t, q in ts[-3:]])
    cases = [
        ("type (every note)", {"type": "note"}),
        ("after (every note)", {"after": "2020-01-01"}),
        ("where status $ne (every note)", {"where": {"status": {"$ne": "retired"}}}),
    ] + [(f"tag {t}", {"tags": [t]}) for t in TAGS]
    cases.append(("any of 6 tags (49.5%)", {"where": {"tags": {"$contains_any": HALF}}}))
    for label, kw in cases:
        for mode in a.modes.split(","):
            ts = timed(settings, qs, mode=mode, **kw)
            ratio = statistics.median(t for t, _q in ts) / statistics.median(base)
            cpu_ratio = statistics.median(CPU) / statistics.median(base_cpu)
            extra = f"  {ratio:.2f}x wall, {cpu_ratio:.2f}x cpu of no filter" if mode == "hybrid" else ""
            print(line(f"{mode}, {label}", ts) + extra)
    print(f"load after {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
