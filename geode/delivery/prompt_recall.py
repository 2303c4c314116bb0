"""Prompt-time recall: on each user prompt, the first search, at most three notes, never blocking.

Runs inside the UserPromptSubmit hook, so it imports the standard library only, and a lean part
of it (no ``re``, ``json``, ``socket``, ``typing``, ``pathlib``: each costs milliseconds at
start-up; ``_socket`` and ``_sqlite3`` are the C modules underneath).

1. A warm ``geode serve`` process (model loaded, Chroma open) listens on a UNIX socket
   (``socket_path``); when it answers within the budget, its hybrid results are used.
2. Otherwise full text alone: FTS5 on the SQLite recall index (``recall_fts``), bm25 with the
   same column weights, the same salience lift and retired fade as ``search.py``, and a note
   must match at least two of the prompt's words when the prompt has two or more, and its score
   is weighed by ``coverage`` as ``geode search``'s text side weighs it. The match is bounded
   (``bounded_top``: each word's notes read from ``recall_word`` in one lookup, rarest words
   first, at most ``SCORE_BOUND`` rows scored a query, bm25 only for notes that pair a rare word
   with another word of the prompt), so its work is bounded from 1,000 to 100,000 notes.
3. Anything else (no index, PostgreSQL without a server, a busy database, an error): nothing.

The query words (``query_terms``) and the FTS5 query (``fts5_query``) are shared with
``search.py``, so the hook and ``geode search`` read a prompt the same way.
"""

from __future__ import annotations

import os
import time

from geode.kernel import fastjson
from geode.kernel.config import default
from geode.kernel.sqlite import sqlite3

MAX_NOTES = 3
FTS_WEIGHTS = (8.0, 5.0, 3.0, 1.0, 5.0)  # title, tags, description, body, dates (as recall_index)
RETIRED = ("deprecated", "superseded", "archived", "legacy")
TEXT_CAP = 1800  # characters of recalled text handed to the agent
#: the whole recall, server or text, when the caller names no budget; the hook passes
#: ``settings.recall.budget_ms`` (GEODE_RECALL_BUDGET_MS, then [recall] budget_ms, then this)
BUDGET_MS = default("recall", "budget_ms")

STOPWORDS = frozenset(
    """
a about above after again all also am an and any are as at be because been before being below
between both but by can cannot could did do does doing done down during each few for from further
get gets got had has have having he her here hers him his how i if in into is it its itself just
let like me more most my no nor not now of off on once only or other our ours out over own same
she should so some such than that the their theirs them then there these they this those through
to too under until up upon us very was we were what when where which while who whom why will with
would you your yours please tell show find give make want need know use using used
der die das den dem des ein eine einer eines einem einen und oder aber ist sind war waren wird
werden nicht kein keine mit von zu zum zur im in auf aus bei für fur wie was wer warum wann wo
ich du er sie es wir ihr man sich auch noch nur schon so dass da hat haben
le la les un une des et ou est sont pas de du au aux en pour par avec qui que quoi comment
el los las y es son por para con que como
""".split()
)


def query_terms(text: str, limit: int = 16) -> list[str]:
    """Lower-cased words of ``text`` without stop words, lightly stemmed (plural ``s``, ``ing``,
    ``ed``) so that a prefix query finds the other forms; at most ``limit``, in order."""
    out: list[str] = []
    seen = set()
    word: list[str] = []
    for ch in text.lower() + " ":
        if ch.isalnum():
            word.append(ch)
            continue
        if not word:
            continue
        w = "".join(word)
        word = []
        if len(w) < 2 or w in STOPWORDS:
            continue
        if len(w) > 5 and w.endswith("ing"):
            w = w[:-3]
        elif len(w) > 5 and w.endswith("ed"):
            w = w[:-2]
        elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        if w not in seen:
            seen.add(w)
            out.append(w)
            if len(out) >= limit:
                break
    return out


def fts5_query(terms: list[str]) -> str:
    """An OR of prefix terms; words hold only letters and digits, so the quoting is safe. A term
    written ``=word`` (``geode.recall.search.match_units``: a short word's whole forms) is the
    whole word only, no prefix."""
    return " OR ".join(f'"{t[1:]}"' if t[:1] == "=" else f'"{t}"*' for t in terms)


def socket_path(home: str) -> str | None:
    """The socket this home's warm server answers on (``geode.delivery.recall_socket``), or None."""
    from geode.delivery import recall_socket

    return recall_socket.socket_path(home)


def ask_server(home: str, request: dict, timeout_s: float, refused: list | None = None):
    """One request to the warm search server (``geode serve``); None when none answers in time.
    The client half of ``geode.services.search_server``: the hook and ``geode search`` ask it.

    Only a socket that passes ``recall_socket``'s checks (private directory, owner, the peer's
    uid) is sent the request, with the home's token; one that fails them is treated as no server
    (the cold path answers) and its reason is appended to ``refused`` when given."""
    from geode.delivery import recall_socket

    try:
        found = recall_socket.trusted_socket(home)
    except recall_socket.Untrusted as exc:
        if refused is not None:
            refused.append(str(exc))
        return None
    except OSError:
        return None
    if found is None:
        return None
    path, token = found
    import _socket

    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        s.settimeout(timeout_s)
        s.connect(path)
        recall_socket.check_peer(s, path)  # before a byte of the prompt leaves this process
        s.sendall(fastjson.dumps({**request, "token": token}).encode("utf-8") + b"\n")
        chunks = []
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            s.settimeout(left)
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
            if data.endswith(b"\n"):
                break
        reply = fastjson.loads(b"".join(chunks).decode("utf-8"))
        return reply if isinstance(reply, dict) else None
    except recall_socket.Untrusted as exc:
        if refused is not None:
            refused.append(str(exc))
        return None
    except (OSError, ValueError):
        return None
    finally:
        s.close()


def _snippet(body: str, terms: list[str], width: int = 220) -> tuple[str, int]:
    """A window of ``body`` around the first line holding a term; (text, offset line in body)."""
    lines = body.split("\n")
    for i, line in enumerate(lines):
        low = line.lower()
        for t in terms:
            if t in low:
                s = " ".join(line.split())
                return (s[:width] + ("…" if len(s) > width else "")), i
    flat = " ".join(body.split())
    return (flat[:width] + ("…" if len(flat) > width else "")), -1


#: rows the text fallback lets FTS5 score at most per query (bm25 costs microseconds a row):
#: the bound that keeps the prompt hook's time flat as the store grows
SCORE_BOUND = 2000
#: the forms a query word stands for (``query_terms`` cut them off): exact tokens, read lazily
FORMS = ("", "e", "s", "es", "ed", "ing", "er")


def _forms(forms: list[str]) -> str:
    """The FTS5 group of a word's forms, as exact tokens (``("build" OR "builds")``). Exact
    tokens, not a prefix: FTS5 reads an exact token's list lazily and stops at a LIMIT, but merges
    every token of a prefix in full first (7 ms for a word in a fifth of 100,000 notes)."""
    return "(" + " OR ".join(f'"{f}"' for f in forms) + ")"


#: the recall_meta key set when ``recall_word`` was last built (``geode.recall.sqlread.WORDS_AT``;
#: written out here because the hook imports nothing of ``geode.recall``)
WORDS_AT = "words_notes"


def word_counts(conn, tokens: list[str]) -> dict[str, int] | None:
    """The notes holding each of ``tokens`` that the index build counted (``recall_word``, one
    indexed lookup; a token it did not see is absent), or None when there is no such table or it
    was never built (an index from before it: then every word is counted in FTS5, bounded)."""
    try:
        if conn.execute("SELECT 1 FROM recall_meta WHERE k = ?", (WORDS_AT,)).fetchone() is None:
            return None
        got = conn.execute(
            f"SELECT term, docs FROM recall_word WHERE term IN ({','.join('?' * len(tokens))})", tokens
        ).fetchall()
    except sqlite3.OperationalError:  # no such table: an index built before it
        return None
    return {str(t): int(d) for t, d in got}


def bounded_top(conn, terms: list[str], n: int, bound: int | None = None, stats: dict | None = None) -> list:
    """(rowid, score) of at most ``n`` notes for ``terms``, best first (score = -bm25, higher is
    better), letting FTS5 score at most about ``bound`` rows per query whatever the store's size.

    Rarest words first: each word's notes are read from ``recall_word`` (``word_counts``: the
    index build's count, one lookup); a word it lacks is counted up to ``bound`` (a LIMIT FTS5
    stops at).
    The words whose notes together stay within the bound are the rare ones R; the notes holding
    one of them are ranked by R's bm25 (the caller lifts those that also hold a common word, by
    ``common_lift``: FTS5 cannot weigh a common word without reading its whole list to count its
    notes, which is what grows with the store). With two words or more, bm25 ranks first the
    notes that hold a rare word and another word of the prompt (``paired``), then the rare words'
    other notes fill up to ``n``. When every word is common, the notes holding all of them (then of fewer,
    rarest first) are read newest first, at most ``bound``, and ranked by bm25: a note that names
    only common words is a weak pointer anyway. ``stats["scored"]`` says how many rows the
    queries could score at most (the sum of their LIMITs and counts), ``stats["plan"]`` which
    plan ran, ``stats["common"]`` the words left out of the ranking query."""
    if bound is None:
        bound = SCORE_BOUND
    w = FTS_WEIGHTS
    bm = f"bm25(recall_fts, {w[0]}, {w[1]}, {w[2]}, {w[3]}, {w[4]})"
    df: dict[str, int] = {}
    groups: dict[str, str] = {}
    # each form counted up to the bound (with the rowid where the count stopped: a word that
    # reaches the bound at rowid r of top is in about bound x top / r notes); only the forms the
    # index holds are kept
    count = "SELECT count(*), max(rowid) FROM (SELECT rowid FROM recall_fts WHERE recall_fts MATCH ? LIMIT ?)"
    top = conn.execute("SELECT max(id) FROM recall_note").fetchone()[0] or 0
    estimate: dict[str, float] = {}
    known = word_counts(conn, [t + f for t in terms for f in FORMS])
    if stats is not None:
        stats["looked_up"] = 0
    for t in terms:
        held = []
        if known is not None and any(t + f in known for f in FORMS):
            for f in FORMS:  # the index build counted this word's notes: one lookup, no posting read
                c = known.get(t + f, 0)
                if c:
                    held.append(t + f)
                    df[t] = df.get(t, 0) + c
                    estimate[t] = estimate.get(t, 0.0) + c
            groups[t] = _forms(held)
            if stats is not None:
                stats["looked_up"] += 1
            continue
        for f in FORMS:  # no count (no table yet, or a word new since its build): a bounded read
            c, last = conn.execute(count, (f'"{t}{f}"', bound + 1)).fetchone()
            if c:
                held.append(t + f)
                df[t] = df.get(t, 0) + c
                estimate[t] = estimate.get(t, 0.0) + (c * top / last if c > bound and last else c)
        if held:
            groups[t] = _forms(held)
    if stats is not None:
        stats["df"] = {t: min(float(top), estimate[t]) for t in groups}
        stats["rows"] = top
    order = sorted((t for t in terms if t in groups), key=lambda t: df[t])
    if stats is not None:
        stats["scored"], stats["plan"] = 0, "none"
    if not order:
        return []
    rare: list[str] = []
    total = 0
    for t in order:
        if total + df[t] > bound:
            break
        rare.append(t)
        total += df[t]
    common = order[len(rare) :]

    def ranked(expr: str, k: int) -> list:
        return [
            (int(i), -float(sc))
            for i, sc in conn.execute(
                f"SELECT rowid, {bm} AS s FROM recall_fts WHERE recall_fts MATCH ? ORDER BY s LIMIT ?", (expr, k)
            )
        ]

    if rare:
        if stats is not None:
            stats["scored"], stats["plan"] = total, "rare"
            stats["common"] = common
        if len(order) < 2 or not PAIRS:
            # ranked by the prefix phrases ``geode search`` ranks by: as few postings as were counted
            return ranked(fts5_query(rare), n)
        if stats is not None:
            stats["plan"] = "rare-pairs"
        # a partner word whose notes are many times the bound is left out of the filter: seeking
        # through its list reads most of its pages, and a note with it and one rare word is weak
        partners = [t for t in order if t in rare or df[t] <= PARTNER_BOUND * bound]
        if len(partners) < 2:
            return ranked(fts5_query(rare), n)
        got = paired(conn, bm, rare, [groups[t] if t in common else fts5_query([t]) for t in partners], partners, n)
        if len(got) < min(n, FILL_BELOW):  # few such notes: the rare words' other notes fill up (same bm25)
            seen = {i for i, _ in got}
            got += [x for x in ranked(fts5_query(rare), n) if x[0] not in seen][: n - len(got)]
        return got
    # every word common: the notes holding all of them, then of the rarest fewer, newest first
    for k in range(len(order), 0, -1):
        expr = " AND ".join(groups[t] for t in order[:k])
        rows = conn.execute(
            f"SELECT rowid, {bm} FROM recall_fts WHERE recall_fts MATCH ? ORDER BY rowid DESC LIMIT ?", (expr, bound)
        ).fetchall()
        if stats is not None:
            stats["scored"] += bound
            stats["plan"] = f"common-and-{k}"
        if len(rows) >= n or k == 1:
            got = sorted(((int(i), -float(sc)) for i, sc in rows), key=lambda x: -x[1])
            return got[:n]
    return []  # pragma: no cover - the loop returns at k == 1


#: a common word enters ``paired``'s filter when its notes are at most this many bounds
PARTNER_BOUND = 5
#: fewer paired notes than this, and the rare words' other notes fill up to ``n`` (a second bm25
#: over them: cheap where so few notes pair, since their words are rare)
FILL_BELOW = 10
#: rank only the notes that hold a rare word and one more of the prompt's words (``paired``)
PAIRS = True


def paired(conn, bm: str, rare: list[str], phrases: list[str], order: list[str], n: int) -> list:
    """(rowid, score) of the ``n`` best notes by the rare words' bm25, among the notes holding a
    rare word and at least one other word of the prompt: the notes ``text_search`` keeps (a note
    must hold two of the prompt's words), so bm25 is computed for them alone, not for every note
    holding one rare word (most of the rare words' notes at 100,000; bm25 is about 1 us a row).

    The filter is a second FTS5 cursor in ``+rowid IN (...)``: its words are never weighed (bm25
    counts the notes of every phrase of its own query, the whole list for a common word), and the
    ``+`` keeps SQLite from driving the ranked cursor by rowid (one FTS5 query per row: 20x
    slower). A common word enters it as its exact forms (``phrases``), read lazily with skips."""
    at = {t: i for i, t in enumerate(order)}
    inner = " OR ".join(
        f"({phrases[at[r]]} AND ({' OR '.join(p for t, p in zip(order, phrases, strict=True) if t != r)}))"
        for r in rare
    )
    sql = (
        f"SELECT rowid, {bm} AS s FROM recall_fts WHERE recall_fts MATCH ?"
        " AND +rowid IN (SELECT rowid FROM recall_fts WHERE recall_fts MATCH ?) ORDER BY s LIMIT ?"
    )
    return [(int(i), -float(sc)) for i, sc in conn.execute(sql, (fts5_query(rare), inner, n))]


def common_lift(cols: tuple[str, str, str, str], common: list[str], df: dict, rows: int) -> float:
    """What the common words a note holds add to its score, as FTS5's bm25 would add them: per
    word, idf x f (k1 + 1) / (f + k1), where f counts its hits in the columns (title, tags,
    description, body) with the column weights, and idf comes from the word's estimated notes
    (``bounded_top``'s ``df``). Length normalisation is left out: an estimate, for the words
    the bounded match could not let FTS5 weigh without reading their whole lists."""
    import math

    out = 0.0
    for t in common:
        f = sum(w * c.count(t) for w, c in zip(FTS_WEIGHTS[:4], cols, strict=True))
        if f <= 0:
            continue
        d = df.get(t, rows / 2)
        idf = math.log((rows - d + 0.5) / (d + 0.5)) if rows > d else 0.0
        if idf > 0:
            out += idf * f * 2.2 / (f + 1.2)
    return out


#: the notes the bounded match ranks for ``text_search`` to weigh further (common words, coverage,
#: salience) before it keeps three
CANDIDATES = 60
#: weigh each note by the share of the prompt's words it holds, as ``geode search``'s text side
COVERAGE = True


def coverage(hay: str, terms: list[str], df: dict, rows: int) -> float:
    """The idf-weighted share of ``terms`` that ``hay`` (a note's lower-cased text) holds, with
    ``geode.recall.search``'s weight ln(1 + N / (1 + df)): the factor ``geode search`` puts on
    a note's bm25 in text mode (``_coverage``), so the fallback ranks a note holding one rare word
    of a question and nothing else below one holding most of its words, as search does. ``df``:
    ``bounded_top``'s (a word no note holds has 0: the largest weight, fully against)."""
    import math

    total = held = 0.0
    for t in terms:
        w = math.log(1.0 + rows / (1.0 + float(df.get(t, 0))))
        total += w
        if t in hay:
            held += w
    return held / total if total > 0 else 0.0


def text_search(
    settings, prompt: str, limit: int = MAX_NOTES, busy_ms: int = 50, stats: dict | None = None
) -> list[dict]:
    """Full text alone on the SQLite recall index; [] when there is none. The match is
    :func:`bounded_top` (flat in the store's size); ``stats`` receives what it reports."""
    path = settings.records_file
    if path is None:
        return []
    terms = query_terms(prompt)
    if not terms:
        return []
    if not os.path.exists(path):
        return []
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=busy_ms / 1000.0, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(busy_ms)}")
        doms = set(settings.domains)
        want = CANDIDATES
        st: dict = {} if stats is None else stats
        while True:
            top = bounded_top(conn, terms, want, stats=st)
            common = st.get("common") or []
            score = dict(top)
            ids = list(score)
            rows = []
            if ids:
                rows = conn.execute(
                    "SELECT n.id, n.domain, n.path, n.permalink, n.title, n.status, n.salience, n.body, n.description,"
                    " n.tags"
                    f" FROM recall_note n WHERE n.id IN ({','.join('?' * len(ids))})",
                    ids,
                ).fetchall()
            rows = [r for r in rows if r[1] in doms]
            if len(rows) >= min(20, CANDIDATES) or len(top) < want or want >= 8 * CANDIDATES:
                break
            want *= 4  # notes of other domains took places: read further (rare: one home, one store)
    except sqlite3.Error:
        return []
    finally:
        conn.close()
    need = 2 if len(terms) >= 2 else 1
    salience_w, retired_w = settings.recall.salience_weight, settings.recall.retired_weight  # as search.py
    df, total = st.get("df") or {}, int(st.get("rows") or 0)
    hits = []
    for nid, domain, rel, perm, title, status, sal, body, desc, tags in rows:
        cols = ((title or "").lower(), (tags or "").lower(), (desc or "").lower(), (body or "").lower())
        hay = f"{cols[0]}\n{cols[2]}\n{cols[3]}"
        if sum(1 for t in terms if t in hay) < need:
            continue
        sc = score[nid]
        if common:
            sc += common_lift(cols, common, df, total)
        if COVERAGE:
            sc *= coverage(f"{hay}\n{cols[1]}", terms, df, total)
        sc = sc * (1.0 + salience_w * float(sal or 0.0))
        if (status or "").lower() in RETIRED:
            sc *= retired_w
        hits.append(
            {
                "address": f"geode://{domain}/{perm}",
                "domain": domain,
                "path": rel,
                "title": title,
                "status": status,
                "score": round(sc, 4),
                "snippet": body,  # cut to a snippet below, for the hits returned only
            }
        )
    hits.sort(key=lambda h: -h["score"])
    hits = hits[:limit]
    for h in hits:  # a snippet splits the whole body: for three notes, not for every candidate
        h["snippet"], _ = _snippet(h["snippet"], terms)
    return hits


def recall(settings, prompt: str, limit: int = MAX_NOTES, budget_ms: int = BUDGET_MS) -> tuple[list[dict], str]:
    """(hits, how): ``how`` is ``serve`` (hybrid, from the warm process), ``text`` or ``none``."""
    prompt = (prompt or "").strip()
    if not prompt:
        return [], "none"
    t0 = time.monotonic()
    reply = ask_server(
        settings.home, {"op": "search", "q": prompt[:2000], "limit": limit, "prompt": True}, budget_ms / 1000.0 * 0.7
    )
    if reply is not None and isinstance(reply.get("results"), list):
        return reply["results"][:limit], "serve"
    left_ms = budget_ms - (time.monotonic() - t0) * 1000.0
    if left_ms < 20:
        return [], "none"
    return text_search(settings, prompt, limit, busy_ms=int(min(left_ms, 100))), "text"


def render(hits: list[dict], how: str, cap: int = TEXT_CAP) -> str:
    """What the agent reads: a header, then each note's title, address, path and snippet."""
    if not hits:
        return ""
    head = (
        "geode: notes that may bear on this prompt (found by "
        + ("hybrid search" if how == "serve" else "full-text search")
        + "; a snippet points, it does not answer: read the note before relying on it)\n"
    )
    out = head
    for h in hits[:MAX_NOTES]:
        line = f" line {h['line']}" if h.get("line") else ""
        status = f" [{h['status']}]" if h.get("status") in RETIRED else ""
        block = f"\n◇ {h.get('title') or h.get('path')}{status} ({h['address']}; {h.get('domain')}/{h.get('path')}{line})\n{h.get('snippet') or ''}\n"
        if len(out) + len(block) > cap:
            break
        out += block
    return out if out != head else ""
