"""Before against after on the same questions: paired bootstrap intervals of the change in a
measure (issue 26, Round 5 in bench/RECALL.md).

    python bench/recall_paired.py BEFORE.json AFTER.json [BEFORE2.json AFTER2.json ...] [--mode hybrid]

Each pair is two ``recall_eval.py --json`` files of one set (the same questions, in the same
order; ``before`` run with ``GEODE_EVAL_SRC`` at the baseline checkout, on the same index). Per
set and per group of questions (all; those needing one, two, three notes), for R_all@5, R_any@5
and MRR: before, after, the difference, and its 95% percentile interval over 2,000 resamples of
the questions with replacement (seed 10), the same resample for both, and the share of resamples
where after is below before.
"""

from __future__ import annotations

import argparse
import json
import random


def _measures(ranks: list[int | None]) -> dict[str, float]:
    hit = [r is not None and r <= 5 for r in ranks]
    first = min((r for r in ranks if r is not None), default=None)
    return {"all@5": float(all(hit)), "any@5": float(any(hit)), "mrr": 1.0 / first if first else 0.0}


def _group(q: dict) -> str:
    n = len(q["answer"].split("|"))
    return {1: "one note", 2: "two notes", 3: "three notes"}.get(n, f"{n} notes")


def paired(before: list[float], after: list[float], rounds: int = 2000, seed: int = 10) -> tuple:
    """(mean before, mean after, difference, low, high, share of resamples below)."""
    n = len(before)
    rng = random.Random(seed)
    diffs = []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        diffs.append(sum(after[i] - before[i] for i in idx) / n)
    diffs.sort()
    b, a = sum(before) / n, sum(after) / n
    return b, a, a - b, diffs[int(0.025 * rounds)], diffs[int(0.975 * rounds) - 1], sum(d < 0 for d in diffs) / rounds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", help="BEFORE.json AFTER.json pairs")
    p.add_argument("--mode", default="hybrid")
    a = p.parse_args(argv)
    if len(a.files) % 2:
        p.error("files come in pairs: BEFORE.json AFTER.json")
    print("| set | questions | n | measure | before | after | diff | 95% interval | share below |")
    print("| --- | --- | --: | --- | --: | --: | --: | --- | --: |")
    for bf, af in zip(a.files[0::2], a.files[1::2], strict=True):
        b, c = json.load(open(bf, encoding="utf-8")), json.load(open(af, encoding="utf-8"))
        assert [q["question"] for q in b["questions"]] == [q["question"] for q in c["questions"]], (bf, af)
        groups: dict[str, list[int]] = {"all": list(range(len(b["questions"])))}
        for i, q in enumerate(b["questions"]):
            groups.setdefault(_group(q), []).append(i)
        for g in ["all", "one note", "two notes", "three notes"]:
            if g not in groups:
                continue
            ids = groups[g]
            for m in ("all@5", "any@5", "mrr"):
                if g == "one note" and m == "any@5":
                    continue  # the same as all@5
                xb = [_measures(b["questions"][i][a.mode])[m] for i in ids]
                xa = [_measures(c["questions"][i][a.mode])[m] for i in ids]
                mb, ma, d, lo, hi, below = paired(xb, xa)
                print(
                    f"| {b['set']} | {g} | {len(ids)} | {m} | {mb:.3f} | {ma:.3f} | {d:+.3f} | "
                    f"[{lo:+.3f}, {hi:+.3f}] | {below:.2f} |"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
