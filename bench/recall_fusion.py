"""Choose the hybrid blend from evidence: every candidate blend, on every evaluation set, offline.

    PYTHONPATH=. .venv/bin/python bench/recall_eval.py --set short --home H1 --dump short.json   # (and longmem, crossling)
    PYTHONPATH=. .venv/bin/python bench/recall_fusion.py short.json longmem.json crossling.json

``recall_eval.py --dump`` writes, per question, the two raw sides (the 50 best notes by bm25 with
their idf-weighted coverage; the 50 best notes by passage cosine). Here each blend ranks those
candidates the way ``geode.recall.search.fuse`` would, and prints all-evidence@5, any@5 and MRR
per set for text alone, semantic alone and each blend, with the verdict "never worse than the
better single side on every set". The neighbour stage is not simulated here (it needs the
index); ``recall_eval.py --hop-weight`` measures it.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ranks_of(order: list[str], want: list[str]) -> list[int | None]:
    return [order.index(w) + 1 if w in order else None for w in want]


def metric(rows: list[list[int | None]]) -> dict:
    n = len(rows) or 1  # a set without such questions: zeros
    all5 = sum(1 for r in rows if all(x is not None and x <= 5 for x in r)) / n
    any5 = sum(1 for r in rows if any(x is not None and x <= 5 for x in r)) / n
    mrr = sum(1.0 / min((x for x in r if x is not None), default=float("inf")) for r in rows) / n
    return {"all@5": round(all5, 3), "any@5": round(any5, 3), "mrr": round(mrr, 3)}


def blend(q: dict, method: str, **kw) -> list[str]:
    """The candidates ranked as ``geode.recall.search.fuse`` ranks them (the same function)."""
    from geode.recall.search import fuse

    lex = {p: s for p, s, _c in q["text"]}
    cov = {p: c for p, _s, c in q["text"]}
    sem = {p: s for p, s in q["semantic"]}
    if method == "text":
        out = fuse(lex, {}, cov)
    elif method == "semantic":
        out = fuse({}, sem, cov)
    else:
        out = fuse(lex, sem, cov, method, k=kw.get("k", 60.0), semantic_weight=kw.get("w", 0.5))
    return [p for p in sorted(out, key=lambda p: (-out[p][0], p)) if out[p][0] > 0]


class Hops:
    """The neighbour stage on a set's real index (``DUMP=HOME`` on the command line)."""

    def __init__(self, home: str):
        from geode.delivery.config import load_settings
        from geode.recall.recall_index import RecallIndex

        self.settings = load_settings(store=os.path.join(home, "store"), home=home)
        self.idx = RecallIndex(self.settings)
        with self.idx.reader.connect() as conn:
            from sqlalchemy import select

            from geode.recall.index_tables import notes_t

            self.rows = {r["path"]: dict(r) for r in conn.execute(select(notes_t)).mappings().all()}
        self.cache: dict[int, dict] = {}

    def apply(self, q: dict, method: str, kw: dict, anchors: int, weight: float, found_only: bool = True) -> list[str]:
        from geode.recall import search as S

        lex = {p: s for p, s, _c in q["text"]}
        cov = {p: c for p, _s, c in q["text"]}
        sem = {p: s for p, s in q["semantic"]}
        out = S.fuse(lex, sem, cov, method, k=kw.get("k", 60.0), semantic_weight=kw.get("w", 0.5))
        scored = sorted(
            ((v[0], self.rows[p], v[1], v[2]) for p, v in out.items() if v[0] > 0), key=lambda t: (-t[0], t[1]["path"])
        )
        real = S.neighbours
        S.neighbours = lambda idx, st, row: self.cache.setdefault(row["id"], real(idx, st, row))  # type: ignore[assignment]
        try:
            scored = S.neighbour_stage(self.idx, self.settings, scored, anchors, weight)
        finally:
            S.neighbours = real  # type: ignore[assignment]
        return [r["path"] for _s, r, _a, _b in scored]


def main(paths: list[str]) -> int:
    sets = {}
    homes = {}
    for arg in paths:
        path, _, home = arg.partition("=")
        name = path.rsplit("/", 1)[-1].replace(".json", "")
        with open(path, encoding="utf-8") as fh:
            sets[name] = json.load(fh)
        if home:
            homes[name] = Hops(home)
    configs: list[tuple[str, dict]] = [("text", {}), ("semantic", {})]
    configs += [("rrf", {"k": k, "w": w}) for k in (1, 3, 5, 10, 20, 40, 60) for w in (0.4, 0.5, 0.6, 0.7)]
    configs += [("minmax", {"w": w}) for w in (0.3, 0.4, 0.5, 0.6, 0.7)]
    configs += [("margin", {"w": w}) for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    configs += [("adaptive", {"w": w}) for w in (0.2, 0.3, 0.4, 0.5, 0.6)]
    table = []
    for method, kw in configs:
        row = {}
        for name, qs in sets.items():
            row[name] = metric([ranks_of(blend(q, method, **kw), q["evidence"]) for q in qs])
        table.append((method, kw, row))
    base = {
        name: {m: max(table[0][2][name][m], table[1][2][name][m]) for m in ("all@5", "any@5", "mrr")} for name in sets
    }
    print("blend".ljust(28) + "".join(f"{n[:12]:>26}" for n in sets) + "   never worse")
    print(" " * 28 + "".join(f"{'all@5 any@5   mrr':>26}" for _n in sets))
    for method, kw, row in table:
        label = method + (" " + ",".join(f"{k}={v}" for k, v in kw.items()) if kw else "")
        never = all(row[n][m] >= base[n][m] - 1e-9 for n in sets for m in ("all@5", "any@5", "mrr"))
        margin = sum(row[n][m] - base[n][m] for n in sets for m in ("all@5", "mrr"))
        cells = "".join(f"{row[n]['all@5']:>10.3f}{row[n]['any@5']:>7.3f}{row[n]['mrr']:>7.3f}   " for n in sets)
        print(f"{label:<28}{cells}{'yes' if never else 'no':>6} {margin:+.3f}")
    if homes:
        print("\nthe neighbour stage, after each blend (multi: questions that need two notes)")
        for method, kw in [c for c in configs if c[0] not in ("text", "semantic")]:
            if (method, kw) not in BLENDS_WITH_HOPS:
                continue
            for anchors, weight in [(a, w) for a in (1, 2, 3) for w in (0.0, 0.5, 1.0)]:
                if True:
                    cells = ""
                    for name, h in homes.items():
                        qs = sets[name]
                        got = [ranks_of(h.apply(q, method, kw, anchors, weight), q["evidence"]) for q in qs]
                        m_all = metric(got)
                        m_multi = metric([g for g, q in zip(got, qs, strict=True) if q["kind"] == "multi"])
                        cells += f"   {name[:12]:>12} {m_all['all@5']:.3f} {m_all['any@5']:.3f} {m_all['mrr']:.3f} multi {m_multi['all@5']:.3f}"
                    print(f"{method} {kw} anchors={anchors} weight={weight}:{cells}")
    return 0


BLENDS_WITH_HOPS = [("margin", {"w": 0.5})]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
