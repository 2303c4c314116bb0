"""Issue 10, Round 4 (bench/RECALL.md): how sure the blend's figures are, and unknown words tuned
jointly with the blend.

    PYTHONPATH=. .venv/bin/python bench/recall_blend3.py --bootstrap short.json=H1 longmem.json=H2 ...
    PYTHONPATH=. .venv/bin/python bench/recall_blend3.py --unknown short.json=H1 longmem.json=H2 \
        crossling.json=H3 --test longmem-test.json=H4 crossling-test.json=H5

``--bootstrap``: each set's questions (dumped by ``recall_eval.py --dump``; the index at HOME for
the neighbour stage) ranked by text alone, semantic alone and the configured hybrid; then a paired
bootstrap (questions resampled with replacement, the same resample for all three rankings,
2,000 resamples, seed 10) of hybrid minus the better single side *on that resample*, per
measure: the observed difference, the resamples' mean, a 95% percentile interval and the share of
resamples where hybrid is below.

``--unknown``: coverage weighs a query word that no note in scope holds with the largest idf, so
it counts fully against every note. Variants of coverage's weights (``weights``), each crossed
with the margin blend's ``semantic_weight``, the coverage exponent (2: ``fuse``'s square) and the
neighbour stage, chosen on the dev sets by Round 2's objective (fewest (set, measure) pairs below
the better single side, then the most gain) and measured on the test sets.
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from recall_fusion import MEASURES, Hops, blend, load_sets, metric, ranks_of, split_test  # noqa: E402


def indicators(rs: list[list[int | None]]):
    """Per question: all@3, all@5, any@3, any@5, reciprocal rank (top 10), as ``metric`` counts them."""
    import numpy as np

    out = []
    for r in rs:
        row = []
        for k in (3, 5):
            row.append(float(all(x is not None and x <= k for x in r)))
        for k in (3, 5):
            row.append(float(any(x is not None and x <= k for x in r)))
        best = min((x for x in r if x is not None and x <= 10), default=None)
        row.append(1.0 / best if best else 0.0)
        out.append([row[0], row[1], row[2], row[3], row[4]])  # all@3 all@5 any@3 any@5 mrr
    return np.array(out)


def bootstrap(paths: list[str], n_boot: int = 2000, seed: int = 10) -> int:
    import numpy as np

    from geode.delivery.prompt_recall import query_terms
    from geode.kernel.config import load_settings
    from geode.recall import search as S
    from geode.recall.filters import filter_where

    rc = load_settings().recall.as_dict()
    while paths and paths[0].startswith("--"):  # --KEY VALUE: a [recall] key other than configured
        rc[paths[0][2:].replace("-", "_")] = float(paths[1])
        paths = paths[2:]
    sets, homes = load_sets(paths)
    w, anchors, hw = float(rc["semantic_weight"]), int(rc["hop_anchors"]), float(rc["hop_weight"])
    below, uww = float(rc["unknown_below"]), float(rc["unknown_word_weight"])

    def hybrid(q: dict, h: Hops) -> list[str]:
        """``search``'s ranking from the dumped sides: coverage recomputed with ``unknown_weight``."""
        conds, _d = filter_where(h.settings, None, None, None, None, None, None, None)
        terms = query_terms(q["question"], limit=24)
        lex = {p: s for p, s, _c in q["text"]}
        sem = {p: s for p, s in q["semantic"]}
        idf = S.term_idf(h.idx, terms, conds, unknown_weight=S.unknown_weight(sem, below, uww))
        cov = {p: S._coverage(terms, h.rows[p], idf) for p in lex}
        out = S.fuse(lex, sem, cov, "margin", semantic_weight=w)
        return h.stage({p: v[0] for p, v in out.items()}, anchors, hw)

    print(
        f"hybrid: margin, semantic_weight {w}, hop_anchors {anchors}, hop_weight {hw}, unknown_below {below}, "
        f"unknown_word_weight {uww}; {n_boot} resamples, seed {seed}"
    )
    print("| set | measure | hybrid | better side | observed diff | bootstrap mean | 95% interval | share below |")
    print("| --- | --- | --: | --: | --: | --: | --- | --: |")
    rng = np.random.default_rng(seed)
    for name, qs in sets.items():
        h = homes[name]
        hy = indicators([ranks_of(hybrid(q, h), q["evidence"]) for q in qs])
        tx = indicators([ranks_of(blend(q, "text"), q["evidence"]) for q in qs])
        se = indicators([ranks_of(blend(q, "semantic"), q["evidence"]) for q in qs])
        n = len(qs)
        counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _b in range(n_boot)]) / n
        bh, bt, bs = counts @ hy, counts @ tx, counts @ se
        diff = bh - np.maximum(bt, bs)
        for j, m in enumerate(MEASURES):
            obs_t, obs_s = tx[:, j].mean(), se[:, j].mean()
            side = "text" if obs_t > obs_s else "semantic" if obs_s > obs_t else "tie"
            obs = hy[:, j].mean() - max(obs_t, obs_s)
            lo, hi = np.percentile(diff[:, j], [2.5, 97.5])
            share = float((diff[:, j] < -1e-12).mean())
            print(
                f"| {name} | {m} | {hy[:, j].mean():.3f} | {max(obs_t, obs_s):.3f} ({side}) | {obs:+.3f} | "
                f"{diff[:, j].mean():+.3f} | [{lo:+.3f}, {hi:+.3f}] | {share:.2f} |"
            )
    return 0


# --unknown: the coverage weights
VARIANTS: list[tuple[str, float]] = (
    [("now", 0.0), ("ignore", 0.0)]
    + [("most", t) for t in (0.5, 0.67)]  # ignore unknown words when at least this share of the query's are
    + [
        ("semlow", t) for t in (0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.3)
    ]  # ignore them when the semantic side's best margin is below this
    + [("ignore0", 0.0), ("most0", 0.5)]  # "0": the unknown words weigh 0 (not 1.0: see ``prepare``)
    + [("semlow0", t) for t in (0.05, 0.075, 0.1, 0.125, 0.15, 0.2)]
)
WS = (0.5, 0.55, 0.6, 0.65, 0.7)
EXPS = (1.0, 2.0, 3.0)
ROUND3 = (0.6, 1, 0.6)  # semantic_weight, hop_anchors, hop_weight before Round 4
HOPS = [(1, 0.0), (1, 0.4), (1, 0.6), (1, 1.0), (2, 0.5), (2, 0.75), (3, 0.5)]


def prepare(name: str, qs: list, h: Hops) -> list[dict]:
    """Per question: coverage by path with every word weighted (``now``) and without unknown words,
    the share of the query's words no note holds, and the semantic side's best margin."""
    from geode.delivery.prompt_recall import query_terms
    from geode.recall import search as S
    from geode.recall.filters import filter_where

    conds, _d = filter_where(h.settings, None, None, None, None, None, None, None)
    unknown_idf = math.log(1 + len(h.rows))
    out = []
    for q in qs:
        terms = query_terms(q["question"], limit=24)
        idf = S.term_idf(h.idx, terms, conds)
        known = {t: v for t, v in idf.items() if v < unknown_idf - 1e-9}
        lex = {p: s for p, s, _c in q["text"]}
        sem = {p: s for p, s in q["semantic"]}
        cov_now = {p: S._coverage(terms, h.rows[p], idf) for p in lex}
        # "ign": the unknown words weigh 1.0 instead of ln(1 + N) (what Round 3's script did:
        # ``_coverage`` weighs a word missing from its weights 1.0); "zero": no weight at all
        one = S.term_idf(h.idx, terms, conds, unknown_weight=1.0)
        zero = S.term_idf(h.idx, terms, conds, unknown_weight=0.0)
        cov_ign = {p: S._coverage(terms, h.rows[p], one) for p in lex}
        cov_zero = {p: S._coverage(terms, h.rows[p], zero) for p in lex}
        btop = S.semantic_confidence(sem)
        share = sum(1 for t in terms if t not in known) / len(terms) if terms else 0.0
        out.append(
            {"lex": lex, "sem": sem, "now": cov_now, "ign": cov_ign, "zero": cov_zero, "share": share, "btop": btop}
        )
    return out


def coverage_of(p: dict, variant: tuple[str, float]) -> dict[str, float]:
    kind, t = variant
    base = kind.rstrip("0")
    ignore = base == "ignore" or (base == "most" and p["share"] >= t) or (base == "semlow" and p["btop"] < t)
    return (p["zero"] if kind.endswith("0") else p["ign"]) if ignore else p["now"]


def unknown(paths: list[str]) -> int:
    from geode.recall.search import fuse

    dev, test = split_test(paths)
    sets, homes = load_sets(dev + test)
    devn = [a.partition("=")[0].rsplit("/", 1)[-1].replace(".json", "") for a in dev]
    testn = [n for n in sets if n not in devn]
    prep = {n: prepare(n, qs, homes[n]) for n, qs in sets.items()}
    for n in sets:
        sh = [p["share"] for p in prep[n]]
        bt = sorted(p["btop"] for p in prep[n])
        print(
            f"{n:<16} questions {len(sh)}; share of unknown words: mean {sum(sh) / len(sh):.2f}, "
            f">=0.5 in {sum(s >= 0.5 for s in sh)}; semantic best margin median {bt[len(bt) // 2]:.3f}"
        )
    single = {
        side: {n: [ranks_of(blend(q, side), q["evidence"]) for q in qs] for n, qs in sets.items()}
        for side in ("text", "semantic")
    }
    base = {n: {m: max(metric(single["text"][n])[m], metric(single["semantic"][n])[m]) for m in MEASURES} for n in sets}
    ranked: dict = {}
    for var in VARIANTS:
        for e in EXPS:
            for w in WS:
                rel = {}
                for n in sets:
                    rel[n] = []
                    for p in prep[n]:
                        cov = {x: c ** (e / 2.0) for x, c in coverage_of(p, var).items()}
                        out = fuse(p["lex"], p["sem"], cov, "margin", semantic_weight=w)
                        rel[n].append({x: v[0] for x, v in out.items()})
                for hop in HOPS:
                    ranked[(var, e, w, hop)] = {
                        n: [ranks_of(homes[n].stage(r, *hop), q["evidence"]) for r, q in zip(rel[n], qs, strict=True)]
                        for n, qs in sets.items()
                    }

    def score(c, names) -> tuple[int, float, list[str]]:
        viol, gain, where = 0, 0.0, []
        for n in names:
            got = metric(ranked[c][n])
            for m in MEASURES:
                if got[m] < base[n][m] - 1e-9:
                    viol += 1
                    where.append(f"{n} {m}")
                gain += got[m] - base[n][m]
            multi = [r for r, q in zip(ranked[c][n], sets[n], strict=True) if q["kind"] == "multi"]
            gain += metric(multi)["all@5"] if multi else 0.0
        return (-viol, round(gain, 3), where)

    def show(c) -> str:
        return f"{c[0][0]}{'' if c[0][0] in ('now', 'ignore', 'ignore0') else ' ' + str(c[0][1])}, e {c[1]:g}, w {c[2]}, hop {c[3]}"

    print("\nbest configuration per coverage variant (chosen on dev), and its test figures:")
    for var in VARIANTS:
        cands = [c for c in ranked if c[0] == var]
        best = max(cands, key=lambda c: score(c, devn)[:2])
        d, t = score(best, devn), score(best, testn)
        print(f"{show(best):<48} dev below {-d[0]} gain {d[1]:+.3f}  test below {-t[0]} gain {t[1]:+.3f} {t[2]}")
    w0, a0, hw0 = ROUND3  # the defaults before this round (the configured ones include its choice)
    ref = (("now", 0.0), 2.0, w0, (a0, hw0))
    d, t = score(ref, devn), score(ref, testn)
    print(
        f"{'Round 3 defaults: ' + show(ref):<48} dev below {-d[0]} gain {d[1]:+.3f}  test below {-t[0]} gain {t[1]:+.3f} {t[2]}"
    )
    print("\neach variant with Round 3's blend (e 2, w 0.6, one anchor at 0.6):")
    for var in VARIANTS:
        c = (var, 2.0, w0, (a0, hw0))
        d, t = score(c, devn), score(c, testn)
        print(f"{show(c):<48} dev below {-d[0]} gain {d[1]:+.3f} {d[2]}  test below {-t[0]} gain {t[1]:+.3f} {t[2]}")
    clean = [c for c in ranked if score(c, devn)[0] == 0]
    both = [c for c in clean if score(c, testn)[0] == 0]
    print(
        f"\n{len(ranked)} configurations; {len(clean)} at or above the better side on every dev measure; of those {len(both)} also on every test measure"
    )
    for c in sorted(both, key=lambda c: score(c, devn)[:2], reverse=True)[:20]:
        print(f"  {show(c):<48} dev gain {score(c, devn)[1]:+.3f} test gain {score(c, testn)[1]:+.3f}")
    # the procedure's held-out figures: 5-fold over the dev questions (seed 7, as --choose)
    import random

    rng = random.Random(7)
    fold_of = {n: [rng.randrange(5) for _q in sets[n]] for n in devn}

    def sub_score(c, sel: dict[str, list[int]]) -> tuple[int, float]:
        viol, gain = 0, 0.0
        for n, idx in sel.items():
            got = metric([ranked[c][n][j] for j in idx])
            t = metric([single["text"][n][j] for j in idx])
            sm = metric([single["semantic"][n][j] for j in idx])
            for m in MEASURES:
                viol += got[m] < max(t[m], sm[m]) - 1e-9
                gain += got[m] - max(t[m], sm[m])
            multi = [ranked[c][n][j] for j in idx if sets[n][j]["kind"] == "multi"]
            gain += metric(multi)["all@5"] if multi else 0.0
        return (-viol, gain)

    held: dict[str, list] = {n: [None] * len(sets[n]) for n in devn}
    for f in range(5):
        train = {n: [j for j in range(len(sets[n])) if fold_of[n][j] != f] for n in devn}
        c = max(ranked, key=lambda c: sub_score(c, train))
        print(f"fold {f + 1}/5: chosen {show(c)}")
        for n in devn:
            for j in range(len(sets[n])):
                if fold_of[n][j] == f:
                    held[n][j] = ranked[c][n][j]
    for n in devn:
        g = metric(held[n])
        mark = "".join("*" if g[m] < base[n][m] - 1e-9 else " " for m in MEASURES)
        print(f"{n:<16}{'held out (5-fold)':<52}" + "".join(f"{g[m]:>7.3f}" for m in MEASURES) + f"  {mark}")
    overall = max(ranked, key=lambda c: score(c, devn)[:2])
    print(f"\nchosen on dev over every variant: {show(overall)}")
    print(f"{'set':<16}{'ranking':<52}" + "".join(f"{m:>7}" for m in MEASURES) + "   two-note all@5")
    bests = {var: max([c for c in ranked if c[0] == var], key=lambda c: score(c, devn)[:2]) for var in VARIANTS}
    for n, qs in sets.items():
        rows = [("text", single["text"][n]), ("semantic", single["semantic"][n]), ("Round 3 defaults", ranked[ref][n])]
        rows += [(show(c), ranked[c][n]) for c in bests.values()]
        for lab, rs in rows:
            g = metric(rs)
            multi = [r for r, q in zip(rs, qs, strict=True) if q["kind"] == "multi"]
            tail = f"{metric(multi)['all@5']:>10.3f}" if multi else ""
            mark = "".join("*" if g[m] < base[n][m] - 1e-9 else " " for m in MEASURES)
            print(f"{n:<16}{lab:<52}" + "".join(f"{g[m]:>7.3f}" for m in MEASURES) + tail + f"  {mark}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--bootstrap"]:
        sys.exit(bootstrap(sys.argv[2:]))
    if sys.argv[1:2] == ["--unknown"]:
        sys.exit(unknown(sys.argv[2:]))
    raise SystemExit(__doc__)
