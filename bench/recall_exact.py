"""Issue 10, Round 4 (bench/RECALL.md): Chroma's approximate (HNSW) nearest passages against exact
cosine over every stored passage, for each evaluation question.

    PYTHONPATH=. .venv/bin/python bench/recall_exact.py short.json=H1 longmem.json=H2 ...

Each question (dumped by ``recall_eval.py --dump``; the index at HOME) is asked of
``Semantic.scored_passages`` twice: unfiltered (Chroma's query, as ``search`` asks it) and through
the filtered path, which compares every passage of the notes in scope exactly when they are at
most ``EXACT_SEMANTIC_MAX``. Printed per set: how many questions' 50 candidate notes (or their
cosines), their order, their top 10 and an answer's rank differ, and the semantic side's measures
both ways.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recall_fusion import load_sets, metric, ranks_of  # noqa: E402


def main(paths: list[str]) -> int:
    from geode.recall import search as S
    from geode.recall.filters import filter_where

    sets, homes = load_sets(paths)
    for name, qs in sets.items():
        h = homes[name]
        conds, _d = filter_where(h.settings, None, None, None, None, None, None, None)
        sem = S.semantic_for(h.settings)
        path_of = {r["id"]: p for p, r in h.rows.items()}
        differ = {"candidates or cosines": 0, "order of 50": 0, "top 10": 0, "an answer's rank": 0}
        ra, rb = [], []
        for q in qs:
            a, _ = sem.scored_passages(h.idx, q["question"], conds, 50, False)  # Chroma's query
            b, _ = sem.scored_passages(h.idx, q["question"], conds, 50, True)  # exact
            oa = [path_of[i] for i in sorted(a, key=lambda i: (-a[i], path_of[i]))]
            ob = [path_of[i] for i in sorted(b, key=lambda i: (-b[i], path_of[i]))]
            x, y = ranks_of(oa, q["evidence"]), ranks_of(ob, q["evidence"])
            differ["candidates or cosines"] += set(a) != set(b) or any(abs(a[i] - b[i]) > 1e-5 for i in set(a) & set(b))
            differ["order of 50"] += oa != ob
            differ["top 10"] += oa[:10] != ob[:10]
            differ["an answer's rank"] += x != y
            ra.append(x)
            rb.append(y)
        print(f"{name:<16}{len(qs)} questions; differ: " + ", ".join(f"{k} {v}" for k, v in differ.items()))
        print(f"{'':<16}semantic, Chroma {metric(ra)}\n{'':<16}semantic, exact  {metric(rb)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
