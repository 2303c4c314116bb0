"""Choose the hybrid blend from evidence: every candidate blend, on every evaluation set, offline.

    PYTHONPATH=. .venv/bin/python bench/recall_eval.py --set short --home H1 --dump short.json   # (and longmem, crossling)
    PYTHONPATH=. .venv/bin/python bench/recall_fusion.py short.json longmem.json crossling.json
    PYTHONPATH=. .venv/bin/python bench/recall_fusion.py --choose short.json=H1 longmem.json=H2 crossling.json=H3 \
        --test longmem-test.json=H4 crossling-test.json=H5
    PYTHONPATH=. .venv/bin/python bench/recall_fusion.py --families short.json=H1 ... --test longmem-test.json=H4 ...

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


MEASURES = ("all@3", "all@5", "any@3", "any@5", "mrr")


def metric(rows: list[list[int | None]]) -> dict:
    n = len(rows) or 1  # a set without such questions: zeros
    out = {}
    for k in (3, 5):
        out[f"all@{k}"] = round(sum(1 for r in rows if all(x is not None and x <= k for x in r)) / n, 3)
        out[f"any@{k}"] = round(sum(1 for r in rows if any(x is not None and x <= k for x in r)) / n, 3)
    ranks = [min((x for x in r if x is not None and x <= 10), default=None) for r in rows]
    out["mrr"] = round(sum(1.0 / x for x in ranks if x is not None) / n, 3)
    return out


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
        from geode.kernel.config import load_settings
        from geode.recall.recall_index import RecallIndex

        self.settings = load_settings(store=os.path.join(home, "store"), home=home)
        self.idx = RecallIndex(self.settings)
        with self.idx.reader.connect() as conn:
            from sqlalchemy import select

            from geode.recall.index_tables import notes_t

            self.rows = {r["path"]: dict(r) for r in conn.execute(select(notes_t)).mappings().all()}
        self.cache: dict[int, dict] = {}

    def apply(
        self, q: dict, method: str, kw: dict, anchors: int, weight: float, past_anchor: bool = False
    ) -> list[str]:
        from geode.recall import search as S

        lex = {p: s for p, s, _c in q["text"]}
        cov = {p: c for p, _s, c in q["text"]}
        sem = {p: s for p, s in q["semantic"]}
        out = S.fuse(lex, sem, cov, method, k=kw.get("k", 60.0), semantic_weight=kw.get("w", 0.5))
        return self.stage({p: v[0] for p, v in out.items()}, anchors, weight, past_anchor)

    def stage(self, rel: dict[str, float], anchors: int, weight: float, past_anchor: bool = False) -> list[str]:
        """``neighbour_stage`` (the real one, on this set's index) over relevances by path."""
        from geode.recall import search as S

        scored = sorted(
            ((v, self.rows[p], 0.0, 0.0) for p, v in rel.items() if v > 0), key=lambda t: (-t[0], t[1]["path"])
        )
        real = S.neighbours

        def cached(idx, st, row):
            if row["id"] not in self.cache:
                self.cache[row["id"]] = real(idx, st, row)
            return self.cache[row["id"]]

        S.neighbours = cached  # type: ignore[assignment]
        try:
            scored = S.neighbour_stage(self.idx, self.settings, scored, anchors, weight, past_anchor)
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

# --choose: the margin blend's weight and the neighbour stage's anchors and weight, chosen together
CHOOSE_W = (0.45, 0.5, 0.55, 0.6, 0.65, 0.7)
CHOOSE_HOPS = [(1, 0.0)] + [(a, hw) for a in (1, 2, 3) for hw in (0.25, 0.4, 0.5, 0.6, 0.75, 1.0)]


def load_sets(paths: list[str]) -> tuple[dict[str, list], dict[str, Hops]]:
    """``DUMP=HOME`` arguments: each set's dumped questions and its index (for the neighbour stage)."""
    sets: dict[str, list] = {}
    homes: dict[str, Hops] = {}
    for arg in paths:
        path, _, home = arg.partition("=")
        if not home:
            raise SystemExit(f"every set needs DUMP=HOME (the neighbour stage reads the index): {arg}")
        name = path.rsplit("/", 1)[-1].replace(".json", "")
        with open(path, encoding="utf-8") as fh:
            sets[name] = json.load(fh)
        homes[name] = Hops(home)
    return sets, homes


def split_test(paths: list[str]) -> tuple[list[str], list[str]]:
    """``DEV... --test TEST...``: the sets parameters are chosen on, and the held-out ones."""
    if "--test" not in paths:
        return paths, []
    i = paths.index("--test")
    return paths[:i], paths[i + 1 :]


def two_note(rs: list, qs: list) -> str:
    multi = [r for r, q in zip(rs, qs, strict=True) if q["kind"] == "multi"]
    return f"{metric(multi)['all@5']:>10.3f}" if multi else ""


def below_sides(rs: list, t: list, s: list) -> list[str]:
    got, bt, bs = metric(rs), metric(t), metric(s)
    return [m for m in MEASURES if got[m] < max(bt[m], bs[m]) - 1e-9]


#: the defaults before Round 3: the neighbour stage let a lifted note pass its anchor
BEFORE = (0.6, 1, 0.6, True)


def choose(paths: list[str], folds: int = 5, seed: int = 7) -> int:
    """Choose ``semantic_weight``, ``hop_anchors`` and ``hop_weight`` over every set (each dump
    given as ``DUMP=HOME``), and say how well the choice holds on questions it was not chosen on.

    The objective, over the chosen questions of every set: first the fewest (set, measure) pairs
    where hybrid is below the better single side (all@3, all@5, any@3, any@5, MRR), then the most
    total margin over it on those measures plus all-evidence@5 of the two-note questions. Printed:
    the choice on all questions (the configured default), and the **held-out** figures: each
    question ranked by the configuration chosen without it (``folds``-fold cross-validation over
    the questions of every set, a fixed seed), and leave-one-set-out (chosen on two sets, measured
    on the third). Sets after ``--test`` are never chosen on: the choice, the configured
    defaults and the defaults before Round 3 are measured on them."""
    import random

    dev, test = split_test(paths)
    sets, homes = load_sets(dev)
    tsets, thomes = load_sets(test)
    configs = [(w, a, hw) for w in CHOOSE_W for a, hw in CHOOSE_HOPS]
    ranked = {
        (c, n): [ranks_of(homes[n].apply(q, "margin", {"w": c[0]}, c[1], c[2]), q["evidence"]) for q in qs]
        for c in configs
        for n, qs in sets.items()
    }
    single = {
        (side, n): [ranks_of(blend(q, side), q["evidence"]) for q in qs]
        for side in ("text", "semantic")
        for n, qs in sets.items()
    }

    def objective(c, sel: dict[str, list[int]]) -> tuple[int, float]:
        viol, gain = 0, 0.0
        for n, idx in sel.items():
            if not idx:
                continue
            got = metric([ranked[(c, n)][j] for j in idx])
            t = metric([single[("text", n)][j] for j in idx])
            s = metric([single[("semantic", n)][j] for j in idx])
            for m in MEASURES:
                best = max(t[m], s[m])
                viol += got[m] < best - 1e-9
                gain += got[m] - best
            multi = [ranked[(c, n)][j] for j in idx if sets[n][j]["kind"] == "multi"]
            if multi:
                gain += metric(multi)["all@5"]
        return (-viol, gain)

    def label(c) -> str:
        return f"semantic_weight {c[0]}, hop_anchors {c[1]}, hop_weight {c[2]}"

    every = {n: list(range(len(qs))) for n, qs in sets.items()}
    full = max(configs, key=lambda c: objective(c, every))
    rng = random.Random(seed)
    fold_of = {n: [rng.randrange(folds) for _q in qs] for n, qs in sets.items()}
    held: dict[str, list] = {n: [None] * len(qs) for n, qs in sets.items()}
    for f in range(folds):
        train = {n: [j for j in every[n] if fold_of[n][j] != f] for n in sets}
        c = max(configs, key=lambda c: objective(c, train))
        print(f"fold {f + 1}/{folds}: chosen {label(c)}")
        for n in sets:
            for j in every[n]:
                if fold_of[n][j] == f:
                    held[n][j] = ranked[(c, n)][j]
    print(f"chosen on all questions: {label(full)} (objective {objective(full, every)})\n")
    print(f"{'set':<12}{'ranking':<34}" + "".join(f"{m:>7}" for m in MEASURES) + "   two-note all@5")
    for n, qs in sets.items():
        rows = [
            ("text", single[("text", n)]),
            ("semantic", single[("semantic", n)]),
            ("hybrid, chosen (in-sample)", ranked[(full, n)]),
            (f"hybrid, held out ({folds}-fold)", held[n]),
        ]
        for lab, rs in rows:
            got = metric(rs)
            multi = [r for r, q in zip(rs, qs, strict=True) if q["kind"] == "multi"]
            tail = f"{metric(multi)['all@5']:>10.3f}" if multi else ""
            print(f"{n:<12}{lab:<34}" + "".join(f"{got[m]:>7.3f}" for m in MEASURES) + tail)
    if len(sets) > 1:
        print("\nleave one set out (chosen on the others, measured on it):")
        for n in sets:
            c = max(configs, key=lambda c: objective(c, {k: v for k, v in every.items() if k != n}))
            got = metric(ranked[(c, n)])
            below = -objective(c, {n: every[n]})[0]
            print(
                f"{n:<12}{label(c):<56}"
                + "".join(f"{got[m]:>7.3f}" for m in MEASURES)
                + f"   below the better side on {below} measure(s)"
            )
    if tsets:
        from geode.kernel.config import load_settings

        rc = load_settings().recall
        default = (float(rc.semantic_weight), int(rc.hop_anchors), float(rc.hop_weight), False)
        print("\ntest sets (never chosen on):")
        print(f"{'set':<16}{'ranking':<60}" + "".join(f"{m:>7}" for m in MEASURES) + "   two-note all@5")
        for n, qs in tsets.items():
            h = thomes[n]
            t = [ranks_of(blend(q, "text"), q["evidence"]) for q in qs]
            sm = [ranks_of(blend(q, "semantic"), q["evidence"]) for q in qs]
            rows = [("text", t), ("semantic", sm)]
            for lab, c in (
                ("hybrid before", BEFORE),
                ("hybrid, the defaults", default),
                ("hybrid, chosen here", (*full, False)),
            ):
                got = [ranks_of(h.apply(q, "margin", {"w": c[0]}, c[1], c[2], c[3]), q["evidence"]) for q in qs]
                bad = below_sides(got, t, sm)
                rows.append((f"{lab} {c[:3]}" + (f" below: {','.join(bad)}" if bad else ""), got))
            for lab, rs in rows:
                g = metric(rs)
                print(f"{n:<16}{lab:<60}" + "".join(f"{g[m]:>7.3f}" for m in MEASURES) + two_note(rs, qs))
    return 0


# --families: every candidate blend kind, the neighbour stage with and without the cap
def candidate(q: dict, fam: str, p: dict) -> dict[str, float]:
    """Relevance by path for one question under a candidate blend. ``margin`` and ``rrf`` are
    ``fuse`` itself; the others re-weigh fuse's two components (lexical ``a``, semantic ``b``):

    - ``topconf``: a per-query weight ``w + lam x (best b - best a)`` (the side whose best hit
      stands higher above nothing counts more);
    - ``conf``: the same from how peaked each side is, ``(best - second) / best``;
    - ``fallback``: follow one side alone when its best hit is peaked (gap >= ``tau``) and the
      other's is not;
    - ``maxnorm``: each side divided by its best in the query (classic max normalisation);
    - ``bgq``: the semantic background at quantile ``q`` of the candidates' cosines (0.5: fuse's);
    - ``cov``: coverage to the power ``e`` in the lexical side (2: fuse's)."""
    from geode.recall.search import fuse

    lex = {x: sc for x, sc, _c in q["text"]}
    cov = {x: c for x, _s, c in q["text"]}
    sem = {x: sc for x, sc in q["semantic"]}
    if fam in ("margin", "rrf"):
        out = fuse(lex, sem, cov, fam, k=p.get("k", 60.0), semantic_weight=p["w"])
        return {x: v[0] for x, v in out.items()}
    both = fuse(lex, sem, cov, "margin", semantic_weight=0.5)
    a = {x: v[1] for x, v in both.items()}
    b = {x: v[2] for x, v in both.items()}
    w = p["w"]

    def peak(vals) -> float:
        v = sorted(vals, reverse=True)
        return (v[0] - (v[1] if len(v) > 1 else 0.0)) / v[0] if v and v[0] > 0 else 0.0

    if fam == "topconf":
        w = min(1.0, max(0.0, w + p["lam"] * (max(b.values(), default=0.0) - max(a.values(), default=0.0))))
    elif fam == "conf":
        w = min(1.0, max(0.0, w + p["lam"] * (peak(b.values()) - peak(a.values()))))
    elif fam == "fallback":
        gs, gt = peak(b.values()), peak(a.values())
        w = 0.999 if gs >= p["tau"] > gt else 0.001 if gt >= p["tau"] > gs else w
    elif fam == "maxnorm":
        ta, tb = max(a.values(), default=0.0) or 1.0, max(b.values(), default=0.0) or 1.0
        return {x: (1 - w) * a[x] / ta + w * b[x] / tb for x in a}
    elif fam == "bgq":
        cs = sorted(sem.values())
        bg = cs[min(len(cs) - 1, int(p["q"] * len(cs)))] if len(cs) >= 8 else min(cs, default=0.0) - 1e-6
        b = {x: max(0.0, (sem[x] - bg) / (1 - bg)) if x in sem else 0.0 for x in a}
    elif fam == "cov":
        a = {x: a[x] * cov.get(x, 1.0) ** (p["e"] - 2) if a[x] > 0 else 0.0 for x in a}
    return {x: (1 - w) * a[x] + w * b[x] for x in a}


FAMILIES = (
    [("margin", {"w": w}) for w in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)]
    + [("rrf", {"k": k, "w": w}) for k in (1, 2, 5, 10, 20, 60) for w in (0.5, 0.6, 0.7, 0.8)]
    + [(f, {"w": w, "lam": lam}) for f in ("topconf", "conf") for w in (0.5, 0.6, 0.7) for lam in (0.1, 0.2, 0.3, 0.5)]
    + [("fallback", {"w": w, "tau": t}) for w in (0.5, 0.6, 0.7) for t in (0.1, 0.2, 0.3, 0.5)]
    + [("maxnorm", {"w": w}) for w in (0.4, 0.5, 0.6, 0.7)]
    + [("bgq", {"w": w, "q": x}) for w in (0.4, 0.5, 0.6, 0.7) for x in (0.65, 0.75, 0.85, 0.95)]
    + [("cov", {"w": w, "e": e}) for w in (0.5, 0.6, 0.7) for e in (1, 3, 4)]
)
FAMILY_HOPS = [(1, 0.0, False)] + [
    (a, hw, pa) for a in (1, 2, 3) for hw in (0.25, 0.4, 0.5, 0.6, 0.75, 1.0) for pa in (True, False)
]


def families(paths: list[str]) -> int:
    """Every candidate kind of blend x the neighbour stage (with the cap and without it: ``past``),
    ranked on the dev sets by ``choose``'s objective; for each kind its best configuration on the
    dev sets and how it does on the test sets. Then the cap alone: over every pair of
    configurations that differ only in it, how often each measure rises or falls on each set."""
    dev, test = split_test(paths)
    sets, homes = load_sets(dev + test)
    ranked: dict = {}
    for fam, p in FAMILIES:
        rel = {n: [candidate(q, fam, p) for q in qs] for n, qs in sets.items()}
        for hop in FAMILY_HOPS:
            ranked[(fam, tuple(p.items()), hop)] = {
                n: [ranks_of(homes[n].stage(r, *hop), q["evidence"]) for r, q in zip(rel[n], qs, strict=True)]
                for n, qs in sets.items()
            }
    single = {
        side: {n: [ranks_of(blend(q, side), q["evidence"]) for q in qs] for n, qs in sets.items()}
        for side in ("text", "semantic")
    }
    devn = [a.partition("=")[0].rsplit("/", 1)[-1].replace(".json", "") for a in dev]
    testn = [n for n in sets if n not in devn]

    def score(c, names) -> tuple[int, float]:
        viol, gain = 0, 0.0
        for n in names:
            got, t, s = metric(ranked[c][n]), metric(single["text"][n]), metric(single["semantic"][n])
            for m in MEASURES:
                viol += got[m] < max(t[m], s[m]) - 1e-9
                gain += got[m] - max(t[m], s[m])
            multi = [r for r, q in zip(ranked[c][n], sets[n], strict=True) if q["kind"] == "multi"]
            gain += metric(multi)["all@5"] if multi else 0.0
        return (-viol, round(gain, 3))

    print("kind, parameters, neighbour stage (anchors, weight, past)   dev (-below, gain)   test (-below, gain)")
    seen = set()
    for c in sorted(ranked, key=lambda c: score(c, devn), reverse=True):
        if c[0] in seen:
            continue
        seen.add(c[0])
        print(f"{c[0]:<9}{str(dict(c[1])):<28}{str(c[2]):<20}{str(score(c, devn)):>18}{str(score(c, testn)):>20}")
    print("\nthe cap (a lifted note never passes its anchor) against the stage without it, paired:")
    for n in sets:
        ups: dict[str, list[int]] = {m: [0, 0] for m in MEASURES}
        for c in ranked:
            if c[2][1] == 0 or c[2][2]:
                continue
            old, new = metric(ranked[(c[0], c[1], (c[2][0], c[2][1], True))][n]), metric(ranked[c][n])
            for m in MEASURES:
                ups[m][0] += new[m] > old[m] + 1e-9
                ups[m][1] += new[m] < old[m] - 1e-9
        print(f"{n:<16}" + "  ".join(f"{m} +{u}/-{d}" for m, (u, d) in ups.items()))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--families"]:
        sys.exit(families(sys.argv[2:]))
    if sys.argv[1:2] == ["--choose"]:
        sys.exit(choose(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
