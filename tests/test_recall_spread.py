"""The spread stage (issue 26): after the first ranking, the notes that share the top hit's
answering line's names and rare words are brought in and lifted toward it, so the second and
third notes of a list question ("How many restaurants has my sister recommended?") are found
though they share no word with the question. Real SQLite FTS5 index; the first ranking is given."""

from __future__ import annotations

from geode.recall.filters import filter_where
from geode.recall.index_tables import dispose_engines
from geode.recall.recall_index import RecallIndex
from geode.recall.search import _coverage, index_for, lexical, match_units, notes_holding_upto, term_idf
from geode.recall.spread import anchor_words, spread_stage
from tests.stores import fresh_settings, write

FILL = "User: Can you help me plan meals for the week?\n\nAssistant: Sure, how many evenings?\n"
NOTES = {
    "c/01.md": FILL + "User: My sister Marta insisted we try Osteria Blu, her favourite restaurant in town.\n",
    "c/02.md": FILL + "User: Had dinner at Koji's on Marta's advice, and she was right about the dumplings.\n",
    "c/03.md": FILL + "User: The restaurant near the office closed for renovation.\n",
    "c/04.md": FILL + "User: I keep forgetting to book a restaurant for the anniversary.\n",
    **{f"c/f{i:02d}.md": FILL + f"User: The weather app says storms all weekend, day {i}.\n" for i in range(16)},
}
QUESTION_TERMS = ["restaurant", "sister", "recommend"]
SIDE = {"lexical": lexical, "coverage": _coverage, "count": notes_holding_upto}


def _setup(tmp_path):
    for rel, text in NOTES.items():
        write(tmp_path / "store", rel, text)
    s = fresh_settings(tmp_path / "store", tmp_path / "home")
    RecallIndex(s).refresh()
    idx = index_for(s)
    rows = {r["path"]: r for r in idx.notes_by_ids(set(range(1, len(NOTES) + 1))).values()}
    conds, doms = filter_where(s, None, None, None, None, None, None, None)
    return s, idx, rows, conds, doms


def test_a_name_in_the_top_hits_line_brings_in_the_note_that_mentions_it_in_passing(tmp_path):
    s, idx, rows, conds, doms = _setup(tmp_path)
    try:
        with idx.sql.connect() as conn:
            units = match_units(idx, conn, QUESTION_TERMS)
        idf = term_idf(idx, QUESTION_TERMS, conds, None, None, units)
        # the first ranking: the note naming the sister, then the two that hold "restaurant"; the
        # note of Marta's second tip holds none of the question's words and is not listed
        first = [(0.9, rows["c/01.md"], 0.9, 0.0), (0.3, rows["c/03.md"], 0.3, 0.0), (0.25, rows["c/04.md"], 0.25, 0.0)]
        out = spread_stage(idx, first, QUESTION_TERMS, idf, units, conds, False, len(NOTES), 1, 1.0, set(doms), **SIDE)
        paths = [r["path"] for _s, r, _a, _b in out]
        assert paths[:2] == ["c/01.md", "c/02.md"], paths  # brought in, second: below its anchor
        assert out[1][0] < out[0][0]
        assert set(paths) == {"c/01.md", "c/02.md", "c/03.md", "c/04.md"}  # nothing else came in
        # off: the first ranking as it was
        assert spread_stage(idx, first, QUESTION_TERMS, idf, units, conds, False, len(NOTES), 1, 0.0, **SIDE) == first
    finally:
        dispose_engines()


def test_a_top_hit_found_by_meaning_first_lends_nothing_when_the_ratio_says_so(tmp_path, monkeypatch):
    """Round 6c: the stage's losses on the meeting-log sets lent from a top hit that did not answer,
    found by meaning (its line of the query's words held one incidental word); with
    ``ANCHOR_LEXICAL_RATIO`` 1 the same first ranking with the anchor's lexical side below its
    semantic side is left as it was. (The default is 0, every anchor lends: once the turn passages
    landed, the rule cost the list questions more than it saved, Round 6d in bench/RECALL.md.)"""
    import geode.recall.spread as spread_mod

    monkeypatch.setattr(spread_mod, "ANCHOR_LEXICAL_RATIO", 1.0)
    s, idx, rows, conds, doms = _setup(tmp_path)
    try:
        with idx.sql.connect() as conn:
            units = match_units(idx, conn, QUESTION_TERMS)
        idf = term_idf(idx, QUESTION_TERMS, conds, None, None, units)
        by_words = [(0.9, rows["c/01.md"], 0.9, 0.2), (0.3, rows["c/03.md"], 0.3, 0.0)]
        by_meaning = [(0.9, rows["c/01.md"], 0.2, 0.9), (0.3, rows["c/03.md"], 0.3, 0.0)]
        args = (QUESTION_TERMS, idf, units, conds, False, len(NOTES), 1, 1.0, set(doms))
        lifted = spread_stage(idx, by_words, *args, **SIDE)
        assert [r["path"] for _s, r, _a, _b in lifted][:2] == ["c/01.md", "c/02.md"]  # the stage acts here
        assert spread_stage(idx, by_meaning, *args, **SIDE) == by_meaning
        monkeypatch.setattr(spread_mod, "ANCHOR_LEXICAL_RATIO", 0.0)  # the default: it lends too
        assert [r["path"] for _s, r, _a, _b in spread_stage(idx, by_meaning, *args, **SIDE)][:2] == [
            "c/01.md",
            "c/02.md",
        ]
    finally:
        dispose_engines()


def test_the_anchor_words_are_the_lines_own_words_with_names_told_apart():
    words = dict(
        anchor_words("User: My sister Marta insisted we try Osteria Blu, her favourite restaurant.", QUESTION_TERMS)
    )
    assert words["marta"] and words["osteria"]  # written as names
    assert "blu" not in words  # too short to count cheaply (its whole forms): left out
    assert not words["insist"] and not words["favourite"]  # plain words (stemmed)
    assert "user" in words and not words["user"]  # the speaker's label opens the line: not a name
    assert "restaurant" not in words and "sister" not in words  # the question's own words


def test_the_stage_is_on_by_default():
    from geode.kernel.config import load_settings

    rc = load_settings(env={}).recall
    assert rc.spread_weight == 1.0 and rc.spread_anchors == 1
