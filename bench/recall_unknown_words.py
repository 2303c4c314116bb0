"""One experiment of issue 10, Round 3 (bench/RECALL.md): coverage without the query's words that
no note holds.

    PYTHONPATH=. .venv/bin/python bench/recall_unknown_words.py short.json=H1 longmem.json=H2 ...

``search`` weighs the query's words by idf for coverage, and a word no note in scope holds gets
the largest weight (it counts fully against every note). For an English question over German and
French logs most words are such words, so every note's coverage is small and coverage squared
crushes the lexical side. Here each question (dumped by ``recall_eval.py --dump``, each set's
index at HOME) is ranked by Round 3's defaults (margin 0.6, the neighbour stage at one anchor,
0.6) twice: with coverage as ``search`` computed it ("as now") and with those words weighed 1.0
instead of their idf ("unknown words at 1.0": Round 3 called it "ignored", but ``_coverage``
weighs a word missing from its weights 1.0, so they were down-weighted, not dropped; Round 4,
``recall_blend3.py --unknown``, measures a true 0 as well). The coverages are
``recall_blend3.prepare``'s ``now`` and ``ign``. Printed per set: all@3, all@5, any@3, any@5, MRR,
two-note all@5 and the measures below the better single side.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(paths: list[str]) -> int:
    from recall_blend3 import prepare
    from recall_fusion import MEASURES, Hops, metric, ranks_of
    from recall_fusion import blend as single

    from geode.recall import search as S

    for arg in paths:
        path, _, home = arg.partition("=")
        name = path.rsplit("/", 1)[-1].replace(".json", "")
        with open(path, encoding="utf-8") as fh:
            qs = json.load(fh)
        h = Hops(home)
        got: dict[str, list] = {"as now": [], "unknown words at 1.0": []}
        for q, p in zip(qs, prepare(name, qs, h), strict=True):
            for label, cov in (("as now", p["now"]), ("unknown words at 1.0", p["ign"])):
                out = S.fuse(p["lex"], p["sem"], cov, "margin", semantic_weight=0.6)
                got[label].append(ranks_of(h.stage({k: v[0] for k, v in out.items()}, 1, 0.6), q["evidence"]))
        t = metric([ranks_of(single(q, "text"), q["evidence"]) for q in qs])
        s = metric([ranks_of(single(q, "semantic"), q["evidence"]) for q in qs])
        for label, rs in got.items():
            g = metric(rs)
            bad = [m for m in MEASURES if g[m] < max(t[m], s[m]) - 1e-9]
            multi = [r for r, q in zip(rs, qs, strict=True) if q["kind"] == "multi"]
            two = f"  two-note all@5 {metric(multi)['all@5']:.3f}" if multi else ""
            print(f"{name:<16}{label:<24}" + " ".join(f"{g[m]:.3f}" for m in MEASURES) + two + f"  below: {bad}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
