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
import statistics
import sys


def ranks_of(order: list[str], want: list[str]) -> list[int | None]:
    return [order.index(w) + 1 if w in order else None for w in want]


def metric(rows: list[list[int | None]]) -> dict:
    n = len(rows)
    all5 = sum(1 for r in rows if all(x is not None and x <= 5 for x in r)) / n
    any5 = sum(1 for r in rows if any(x is not None and x <= 5 for x in r)) / n
    mrr = sum(1.0 / min((x for x in r if x is not None), default=float("inf")) for r in rows) / n
    return {"all@5": round(all5, 3), "any@5": round(any5, 3), "mrr": round(mrr, 3)}


def text_scores(q: dict, squared: bool) -> dict[str, float]:
    top = max((s for _p, s, _c in q["text"]), default=0.0)
    return {p: (s / top) * c * (c if squared else 1.0) for p, s, c in q["text"]} if top > 0 else {}


def sem_background(sims: list[float]) -> float:
    return statistics.median(sims) if sims else 0.0


def blend(q: dict, method: str, **kw) -> list[str]:
    lex = text_scores(q, squared=bool(q["semantic"]))
    sem = {p: s for p, s in q["semantic"]}
    if method == "text":
        out = text_scores(q, squared=False)
    elif method == "semantic":
        out = dict(sem)
    elif method == "rrf":
        k, ws = kw["k"], kw["ws"]
        lr = {p: r for r, p in enumerate(sorted(lex, key=lambda p: -lex[p]), 1) if lex[p] > 0}
        sr = {p: r for r, p in enumerate(sorted(sem, key=lambda p: -sem[p]), 1)}
        out = {
            p: (1 - ws) / (k + lr[p]) * (1 if p in lr else 0) + (ws / (k + sr[p]) if p in sr else 0.0)
            for p in set(lr) | set(sr)
        }
    elif method in ("minmax", "bg"):
        ws = kw["ws"]
        vals = list(sem.values())
        hi = max(vals, default=0.0)
        lo = min(vals, default=0.0) if method == "minmax" else sem_background(vals)
        b = {p: max(0.0, (s - lo) / (hi - lo)) if hi > lo else 1.0 for p, s in sem.items()}
        out = {p: (1 - ws) * lex.get(p, 0.0) + ws * b.get(p, 0.0) for p in set(lex) | set(b)}
    elif method == "cos":  # the cosine's margin over the query's background, unscaled
        ws = kw["ws"]
        vals = list(sem.values())
        bg = sem_background(vals)
        b = {p: max(0.0, s - bg) / max(1e-9, 1 - bg) for p, s in sem.items()}
        out = {p: (1 - ws) * lex.get(p, 0.0) + ws * kw.get("gain", 1.0) * b.get(p, 0.0) for p in set(lex) | set(b)}
    else:
        raise ValueError(method)
    return [p for p in sorted(out, key=lambda p: (-out[p], p)) if out[p] > 0]


def main(paths: list[str]) -> int:
    sets = {}
    for path in paths:
        with open(path, encoding="utf-8") as fh:
            sets[path.rsplit("/", 1)[-1].replace(".json", "")] = json.load(fh)
    configs: list[tuple[str, dict]] = [("text", {}), ("semantic", {})]
    configs += [("rrf", {"k": k, "ws": ws}) for k in (1, 3, 5, 10, 20, 40, 60) for ws in (0.4, 0.5, 0.6, 0.7)]
    configs += [("minmax", {"ws": ws}) for ws in (0.3, 0.4, 0.5, 0.6, 0.7)]
    configs += [("bg", {"ws": ws}) for ws in (0.3, 0.4, 0.5, 0.6, 0.7)]
    configs += [("cos", {"ws": 0.5, "gain": g}) for g in (1, 2, 4, 6, 8, 12)]
    table = []
    for method, kw in configs:
        row = {}
        for name, qs in sets.items():
            row[name] = metric([ranks_of(blend(q, method, **kw), q["evidence"]) for q in qs])
        table.append((method, kw, row))
    base = {name: {m: max(table[0][2][name][m], table[1][2][name][m]) for m in ("all@5", "any@5", "mrr")} for name in sets}
    print("blend".ljust(28) + "".join(f"{n[:12]:>26}" for n in sets) + "   never worse")
    print(" " * 28 + "".join(f"{'all@5 any@5   mrr':>26}" for _n in sets))
    for method, kw, row in table:
        label = method + (" " + ",".join(f"{k}={v}" for k, v in kw.items()) if kw else "")
        never = all(row[n][m] >= base[n][m] - 1e-9 for n in sets for m in ("all@5", "any@5", "mrr"))
        margin = sum(row[n][m] - base[n][m] for n in sets for m in ("all@5", "mrr"))
        cells = "".join(f"{row[n]['all@5']:>10.3f}{row[n]['any@5']:>7.3f}{row[n]['mrr']:>7.3f}   " for n in sets)
        print(f"{label:<28}{cells}{'yes' if never else 'no':>6} {margin:+.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
