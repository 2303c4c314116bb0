"""Precision and recall of crystal firing on the labelled set, through the real engine.

Every (action, term) of ``tests/fixtures/matching_cases.txt`` becomes one crystal of a fresh
store (``on: ACTION``, ``match:`` that one term, a one-line essence); every case's text is then
handed to ``Delivery.act`` exactly as the hook hands a tool call over, and the term "fired" when
its crystal was delivered, skipped for budget, withheld or suppressed (it matched). The same
cases are also judged by the plain substring rule (``term in text``, case-insensitive: the rule
geode used before token-aware matching) so that "a true fire the old rule caught and the new one
loses" can be listed.

Run: ``PYTHONPATH=. .venv/bin/python bench/match_eval.py [--cases FILE] [--json OUT] [--check]``. ``--check``
exits 1 when a case fires that should not, or a true fire the substring rule caught is lost.
See ``bench/MATCHING.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from tests.matching_cases import load_cases  # noqa: E402


def _yaml_single(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def engine_fires(cases) -> list[bool]:
    """For each case, whether its term's crystal matched its text in the real engine."""
    from geode.delivery.engine import Delivery
    from geode.delivery.index import Index
    from geode.kernel.config import load_settings

    tmp = tempfile.mkdtemp(prefix="geode-match-eval-")
    try:
        home = os.path.join(tmp, "home")
        store = os.path.join(home, "store")
        os.makedirs(store)
        files: dict[tuple[str, str], str] = {}
        for c in cases:
            key = (c.action, c.term)
            if key in files:
                continue
            rel = f"c{len(files):04d}.md"
            files[key] = rel
            with open(os.path.join(store, rel), "w", encoding="utf-8") as fh:
                fh.write(
                    "---\n"
                    f"name: case-{len(files):04d}\n"
                    "crystal:\n"
                    "  deliver: act\n"
                    f"  on: {c.action}\n"
                    f"  match: [{_yaml_single(c.term)}]\n"
                    "---\n<!-- crystal:essence -->\nx\n<!-- /crystal:essence -->\n"
                )
        settings = load_settings(env={"GEODE_HOME": home, "GEODE_WITHHOLD_RATE": "0"})
        idx = Index(settings)
        idx.ensure()
        out = []
        try:
            for i, c in enumerate(cases):
                d = Delivery(settings, f"eval-{i}", "main", idx)
                res = d.act((c.action,), c.text)
                d.close()
                hit = {e["path"] for kind in ("delivered", "skipped", "withheld", "suppressed") for e in res[kind]}
                out.append(files[(c.action, c.term)] in hit)
        finally:
            idx.close()
        # sanity: every crystal was indexed with the one term it was written with
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def substring_fires(cases) -> list[bool]:
    """The rule before token-aware matching: the term occurs in the text, case-insensitively."""
    return [c.term.lower() in c.text.lower() for c in cases]


def score(cases, fired: list[bool]) -> dict:
    tp = sum(1 for c, f in zip(cases, fired, strict=False) if f and c.fire)
    fp = sum(1 for c, f in zip(cases, fired, strict=False) if f and not c.fire)
    fn = sum(1 for c, f in zip(cases, fired, strict=False) if not f and c.fire)
    tn = sum(1 for c, f in zip(cases, fired, strict=False) if not f and not c.fire)
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": round(tp / (tp + fp), 4) if tp + fp else None,
        "recall": round(tp / (tp + fn), 4) if tp + fn else None,
    }


def report(cases, fired, old) -> dict:
    by_action = {}
    for a in sorted({c.action for c in cases}):
        idx = [i for i, c in enumerate(cases) if c.action == a]
        by_action[a] = {"cases": len(idx), **score([cases[i] for i in idx], [fired[i] for i in idx])}
    false_fires = [c for c, f in zip(cases, fired, strict=False) if f and not c.fire]
    missed = [c for c, f in zip(cases, fired, strict=False) if not f and c.fire]
    lost = [c for c, f, o in zip(cases, fired, old, strict=False) if c.fire and o and not f]
    return {
        "cases": len(cases),
        "terms": len({(c.action, c.term) for c in cases}),
        "positives": sum(c.fire for c in cases),
        "all": score(cases, fired),
        "by_action": by_action,
        "false_fires": [repr(c) for c in false_fires],
        "missed": [repr(c) for c in missed],
        "lost_vs_substring": [repr(c) for c in lost],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the results here")
    ap.add_argument(
        "--check",
        action="store_true",
        help="exit 1 on any false fire or any true fire the substring rule caught and this one lost",
    )
    ap.add_argument(
        "--cases",
        default=None,
        help="a labelled set other than tests/fixtures/matching_cases.txt "
        "(tests/fixtures/matching_cases_grammar.txt: the grammar's agent-shaped cases)",
    )
    args = ap.parse_args(argv)
    cases, sources = load_cases(args.cases) if args.cases else load_cases()
    t0 = time.perf_counter()
    fired = engine_fires(cases)
    secs = time.perf_counter() - t0
    old = substring_fires(cases)
    rep = report(cases, fired, old)
    rep_old = report(cases, old, old)
    agree = sum(1 for a, b in zip(fired, old, strict=False) if a == b)
    print(
        f"labelled set: {rep['cases']} cases, {rep['terms']} terms, {rep['positives']} should fire; "
        f"{len(sources)} sources; engine run {secs:.1f} s"
    )
    print(f"{'rule':<28} | {'precision':>9} | {'recall':>6} | {'TP':>4} | {'FP':>4} | {'FN':>4} | {'TN':>4}")
    for name, r in (("this engine", rep), ("substring (term in text)", rep_old)):
        a = r["all"]
        print(
            f"{name:<28} | {a['precision']:>9.3f} | {a['recall']:>6.3f} | {a['tp']:>4} | {a['fp']:>4} | {a['fn']:>4} | {a['tn']:>4}"
        )
    print("\nby action (this engine):")
    for a, r in rep["by_action"].items():
        p = "-" if r["precision"] is None else f"{r['precision']:.3f}"
        rc = "-" if r["recall"] is None else f"{r['recall']:.3f}"
        print(f"  {a:<7} {r['cases']:>4} cases  precision {p:>5}  recall {rc:>5}  FP {r['fp']:>3}  FN {r['fn']:>3}")
    print(f"\nthe engine agrees with the substring rule on {agree} of {len(cases)} cases")
    for title, rows in (
        ("false fires", rep["false_fires"]),
        ("missed true fires", rep["missed"]),
        ("true fires the substring rule caught and this engine lost", rep["lost_vs_substring"]),
    ):
        print(f"\n{title}: {len(rows)}")
        for r in rows:
            print(f"  {r}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(
                {
                    "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
                    "engine": rep,
                    "substring": rep_old,
                    "agree_with_substring": agree,
                },
                fh,
                indent=1,
            )
    if args.check and (rep["false_fires"] or rep["lost_vs_substring"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
