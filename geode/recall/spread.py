"""The spread stage: for answers spread over several notes, bring in the notes that share the top
hits' distinctive words (issue 26).

A list or count question ("How many restaurants has my sister recommended?") shares its words
with the note that introduces the thing ("My sister Marta insisted we try Osteria Blu, her
favourite restaurant") but not with the notes that mention the next items in passing and in other
words ("Had dinner at Koji's on Marta's advice"). What ties those to the first is what the first
hit's answering line says beyond the question: a name, a rare noun. So, after the first ranking:

1. **The anchors' words**: for each of the top ``anchors`` hits, its answering line (the line
   holding the most idf weight of the query's words, as the reader would see it) is read for its
   own words: not the query's, not stop words, of ``MIN_WORD`` letters or more, held by at least
   one other note and by at most ``DISTINCT_SHARE`` of the notes in scope and ``MAX_DF`` notes
   (a word every note holds ties nothing; counted over the whole index, as the query's words
   are). At most ``WORDS_PER_ANCHOR`` of them: the words written as names first (a person, a
   product), then the rarest; each weighted by its idf, a name by ``NAME_WEIGHT`` times it.
2. **The notes that share them**: the full-text side is asked for those words (the scope's
   filters apply, as to the first query), so a note the first ranking never listed can come in.
3. **The lift**: a note holding a share ``o`` (idf-weighted) of an anchor's words gains
   ``weight x o x anchor's score`` (added: the second note of a spread answer often has no
   signal of its own, a semantic score of 0 and none of the question's words). Its relevance of
   its own still orders the notes that share the same words: "Marta is moving to Leeds" gains as
   much as "dinner on Marta's advice" and stays below it when the question is about food.

As the neighbour stage, a lifted note rises **toward** its anchor and never past it (its score
is capped just below the highest lending anchor's): the stage has no evidence that a note sharing
a name answers better than the note the name came from.

**An anchor found by meaning first may be kept from lending** (``ANCHOR_LEXICAL_RATIO``: its
lexical component at most that share of its semantic one; 0, the default, lets every anchor
lend). Round 6c set it to 1 (the test the hit's snippet makes: ``search`` shows such a hit's best passage, not a line of the
query's words). The answering line is the line that holds the query's words; in a note found by
meaning first that line holds one incidental word, and its names are not the question's subject.
Measured (Round 6c in bench/RECALL.md, on the train sets): every loss of the stage on the
meeting-log sets (MRR, a first evidence note pushed down a rank) lent from a top hit that was not
an answer, and all but two such hits were found by meaning first; every gain on the list/count
set lent from a top hit found by its words. Once turn passages and the semantic floor landed
(Round 6a), far more top hits are found by meaning first, and on the train sets the rule cost
R_all@5 (spread 0.958 → 0.875, longmem 0.652 → 0.634, crossling 0.691 → 0.676) for MRR within
0.021; the issue's measure is R_all@5, so the default is 0 (Round 6d in bench/RECALL.md).
"""

from __future__ import annotations

import math

from geode.delivery.prompt_recall import query_terms
from geode.recall.hits import fold, whole_words

WORDS_PER_ANCHOR = 4  # an anchor's distinctive words asked for (its rarest)
DISTINCT_SHARE = 0.1  # a word held by more than this share of the notes in scope is not distinctive
CANDIDATES = 50  # notes read for the anchors' words
NAME_WEIGHT = 3.0  # a word written as a name weighs this many times its idf in the share held
MIN_WORD = 4  # shorter words are left out (each would need its whole forms counted: search.match_units)
MAX_DF = 100  # ... and so is a word more notes hold than this, whatever the scope's size
MAX_COUNTED = 12  # an anchor line's words whose notes are counted (each count is a query)
#: an anchor whose lexical component is at most this share of its semantic one lends nothing
#: (found by meaning first, see the module docstring); 0 lets every anchor lend
ANCHOR_LEXICAL_RATIO = 0.0


def answer_line(row: dict, terms: list[str], idf: dict[str, float], units: dict[str, list[str]]) -> str:
    """The line of ``row`` (title, description and body lines) holding the most idf weight of the
    query's words (whole words for the words ``units`` matches whole); "" when none holds any."""
    pats = []
    for t in terms:
        us = units.get(t) or [t]
        pats.append((t, whole_words(us) if us[0][:1] == "=" else None))
    best, best_w = "", 0.0
    for line in [row.get("title") or "", row.get("description") or ""] + (row.get("body") or "").split("\n"):
        low = fold(line)
        w = sum(idf.get(t, 1.0) for t, p in pats if (p.search(low) if p is not None else fold(t) in low))
        if w > best_w:
            best, best_w = line, w
    return best


def anchor_words(line: str, terms: list[str]) -> list[tuple[str, bool]]:
    """The words of ``line`` that the query does not hold (``query_terms``' stems, so "Marta's"
    is "marta"), in the line's order, each with whether it is written as a name (capitalised
    inside a sentence: not the line's first word, nor the first after a speaker's colon or a full
    stop)."""
    import re

    names = set()
    for m in re.finditer(r"(^|[.!?:]\s+|\s)(\w+)", line):
        word = m.group(2)
        if word[:1].isupper() and m.group(1).strip() == "" and m.start(2) > 0:
            names.update(query_terms(word, limit=1))
    query = set(terms)
    out = []
    for w in query_terms(line, limit=64):
        if (
            len(w) < MIN_WORD
            or w.isdigit()
            or w in query
            or any(w.startswith(q) or q.startswith(w) for q in query if len(q) >= 4)
        ):
            continue
        out.append((w, w in names))
    return out


def spread_stage(
    idx,
    scored: list,
    terms: list[str],
    idf: dict[str, float],
    units: dict[str, list[str]],
    conds,
    filtered: bool,
    notes_in_scope: int,
    anchors: int,
    weight: float,
    domains: set[str] | None = None,
    *,
    lexical,
    coverage,
    count,
) -> list:
    """``scored`` (score, row, lexical, semantic), best first, with the notes sharing the top
    ``anchors`` hits' distinctive words lifted (and brought in); see the module's docstring.
    The full-text side is the caller's (``search`` passes its ``lexical``, ``_coverage`` and
    ``notes_holding_upto``), so this module does not import it."""
    if weight <= 0 or anchors <= 0 or not scored or not terms or scored[0][0] <= 0:
        return scored
    cap_df = max(2, min(MAX_DF, int(DISTINCT_SHARE * notes_in_scope)))
    lends: list[tuple[float, int, dict[str, float], dict[str, list[str]]]] = []
    with idx.sql.connect() as conn:
        for score, row, a, b in scored[:anchors]:
            if (a or 0.0) <= ANCHOR_LEXICAL_RATIO * (b or 0.0) and ANCHOR_LEXICAL_RATIO > 0.0:
                continue  # found by meaning first: its line of the query's words is incidental
            found_words = anchor_words(answer_line(row, terms, idf, units), terms)
            if not found_words:
                continue
            is_name = dict(found_words)
            # at most MAX_COUNTED words are counted (a long paragraph holds dozens): the names,
            # then the longest (the rarer, as a rule)
            words = sorted(is_name, key=lambda w: (not is_name[w], -len(w)))[:MAX_COUNTED]
            wu = {w: [w] for w in words}  # prefixes, as every query word of MIN_WORD letters or more
            dfs = {w: count(idx, conn, w, cap_df) for w in words}
            # names first (a person, a product: what ties the notes of a spread answer), then rarest
            keep = sorted((w for w in words if 2 <= dfs[w] <= cap_df), key=lambda w: (not is_name[w], dfs[w]))
            keep = keep[:WORDS_PER_ANCHOR]
            if keep:
                wts = {w: NAME_WEIGHT ** is_name[w] * math.log(1.0 + notes_in_scope / (1.0 + dfs[w])) for w in keep}
                lends.append((score, row["id"], wts, {w: wu[w] for w in keep}))
    if not lends:
        return scored
    by_id = {row["id"]: (s, row, a, b) for s, row, a, b in scored}
    want = sorted({w for _s, _i, wts, _u in lends for w in wts})
    found = lexical(idx, want, conds, CANDIDATES, filtered)
    new_ids = [i for i in found if i not in by_id]
    if new_ids:
        rows = idx.notes_by_ids(set(new_ids))
        for i in new_ids:
            if i in rows and (domains is None or rows[i]["domain"] in domains):
                by_id[i] = (0.0, rows[i], 0.0, 0.0)
    out = []
    for s, row, a, b in by_id.values():
        lift, cap = 0.0, None
        for a_score, a_id, wts, wu in lends:
            if a_id == row["id"]:
                continue
            o = coverage(list(wts), row, wts, wu)
            if o > 0:
                lift += weight * o * a_score
                cap = max(cap or 0.0, a_score)
        new = s + lift
        if cap is not None and s < cap <= new:
            new = max(s, math.nextafter(cap, 0.0))  # just below the anchor: it stays ahead
        if new > 0:
            out.append((new, row, a, b))
    out.sort(key=lambda t: (-t[0], t[1]["path"]))
    return out
