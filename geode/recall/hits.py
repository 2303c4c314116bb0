"""What each search hit carries beside its score: a snippet (a window around the best match)
and the file line of the observation it is in, and the ``supersedes`` chain followed both ways.

Apart from ``geode.recall.search`` (ranking) because it is computed only for the hits that are
returned, after ranking, and ``fold`` (the word folding FTS5 applies) is shared with the
coverage of the lexical side and the bench.
"""

from __future__ import annotations

from geode.recall.recall_index import RecallIndex, address
from geode.recall.sqlread import NOTE_SELECT, in_list


def fold(s: str) -> str:
    """Lower-case without diacritics, as FTS5's ``remove_diacritics`` sees words."""
    import unicodedata

    s = s.lower()
    if s.isascii():
        return s
    return "".join(ch for ch in unicodedata.normalize("NFKD", s) if not unicodedata.combining(ch))


def snippet_and_line(row: dict, observations: list, terms: list[str], width: int = 200) -> tuple[str, int | None]:
    """A window around the best match, and the observation's file line when it is in one."""
    fterms = [fold(t) for t in terms]

    def hits(s: str) -> int:
        f = fold(s)
        return sum(1 for t in fterms if t in f)

    best_obs = max(observations, key=lambda o: hits(o[2]), default=None) if fterms else None
    lines = row["body"].split("\n")
    best_i, best_n = -1, 0
    for i, line in enumerate(lines):
        n = hits(line) if fterms else 0
        if n > best_n:
            best_i, best_n = i, n
    if best_obs is not None and hits(best_obs[2]) > 0 and hits(best_obs[2]) >= best_n:
        return _window(best_obs[2], fterms, width), int(best_obs[0])
    if best_i >= 0:
        return _window(lines[best_i], fterms, width), None
    base = row.get("description") or " ".join(row["body"].split())
    return _window(base, [], width), None


def _window(s: str, fterms: list[str], width: int) -> str:
    s = " ".join(s.split())
    if len(s) <= width:
        return s
    f = fold(s)
    pos = min((f.find(t) for t in fterms if f.find(t) >= 0), default=0)
    start = max(0, pos - width // 3)
    out = s[start : start + width]
    return ("…" if start > 0 else "") + out + ("…" if start + width < len(s) else "")


# -- supersedes chain -------------------------------------------------------------------------------
def supersedes_chain(idx: RecallIndex, row: dict, max_steps: int = 10) -> tuple[list[str], list[str]]:
    """(what this note supersedes, transitively; what supersedes it, transitively) as addresses."""
    from geode.recall.context import resolve_target

    older, newer = [], []
    seen = {row["id"]}
    cur = [row]
    for _ in range(max_steps):
        nxt = []
        for r in cur:
            with idx.sql.connect() as conn:
                targets = conn.column(
                    "SELECT target FROM recall_link WHERE note_id = :i AND relation = 'supersedes'", {"i": r["id"]}
                )
            for t in targets:
                hit = resolve_target(idx, r, t)
                if hit and hit["id"] not in seen:
                    seen.add(hit["id"])
                    older.append(address(hit["domain"], hit["permalink"]))
                    nxt.append(hit)
        if not nxt:
            break
        cur = nxt
    cur = [row]
    for _ in range(max_steps):
        nxt = []
        for r in cur:
            names = {r["name"], r["permalink"], r["title"], r["path"], r["path"].rsplit(".", 1)[0]}
            p: dict = {}
            named = in_list("recall_link.target", sorted(names), p, "n")
            with idx.sql.connect() as conn:
                rows = conn.rows(
                    f"{NOTE_SELECT} JOIN recall_link ON recall_link.note_id = recall_note.id "
                    f"WHERE recall_link.relation = 'supersedes' AND {named}",
                    p,
                )
            for h in rows:
                if h["id"] not in seen:
                    seen.add(h["id"])
                    newer.append(address(h["domain"], h["permalink"]))
                    nxt.append(h)
        if not nxt:
            break
        cur = nxt
    return older, newer


def passage_snippet(row: dict, passage: dict, terms: list[str], width: int = 200) -> tuple[str, int | None]:
    """The snippet and file line of a note's best passage (as the semantic side found it).

    ``passage`` holds the passage's ``line_start``/``line_end`` (file lines). Within its lines the
    one holding most query words is shown (a question in other words: the passage's first line of
    prose, past a heading); None when the passage's lines are not in the indexed body (a vector
    from before passages, or a note changed since it was embedded)."""
    ls, le = passage.get("line_start"), passage.get("line_end")
    if not isinstance(ls, int) or not isinstance(le, int):
        return "", None
    base = int(row.get("body_line") or 1)
    lines = row["body"].split("\n")
    lo, hi = ls - base, le - base
    if lo < 0 or hi >= len(lines) or hi < lo:
        return "", None
    fterms = [fold(t) for t in terms]
    best_i, best_n = -1, 0
    for i in range(lo, hi + 1):
        n = sum(1 for t in fterms if t in fold(lines[i]))
        if n > best_n:
            best_i, best_n = i, n
    if best_i < 0:
        prose = [i for i in range(lo, hi + 1) if lines[i].strip() and not lines[i].lstrip().startswith("#")]
        best_i = prose[0] if prose else lo
    return _window(lines[best_i], fterms, width), base + best_i


def whole_words(units: list[str]):
    """A pattern finding any of the ``=word`` units as a whole word (FTS5's unicode61 words:
    letters and digits)."""
    import re

    alts = "|".join(re.escape(fold(u[1:])) for u in units)
    return re.compile(rf"(?<![^\W_])(?:{alts})(?![^\W_])")
