"""The addresses closest to one that names no note: what ``geode read`` and the MCP tools answer
an unknown address with, so that a one-letter typo is a suggestion, not a dead end.

Below the surfaces (the command line and the MCP server both call it; no surface imports another).
"""

from __future__ import annotations

import contextlib
import difflib
import re

from geode.kernel.errors import GeodeError


def closest(settings, index, address: str, n: int = 5, lock=None) -> list[tuple[str, str]]:
    """Addresses like ``address``: by spelling (permalink, name, title) among the notes of its
    folder and the notes whose permalink or title holds one of its words, then by a text
    search of its words. Candidates are chosen in SQL, so the cost does not grow with the store.

    ``index``: a callable giving the recall index to read (the caller's own, opened once);
    ``lock``: held around each use of it (the MCP server serialises its calls)."""
    from sqlalchemy import func, or_, select
    from sqlalchemy.exc import SQLAlchemyError

    from geode.recall.index_tables import notes_t
    from geode.recall.recall_index import address as addr_of
    from geode.recall.recall_index import parse_address

    guard = lock if lock is not None else contextlib.nullcontext()
    domain, perm = parse_address(address, settings)
    perm = perm.rstrip("*").strip("/")
    doms = [domain] if domain in settings.domains else list(settings.domains)
    low = perm.lower()
    folder = low.rsplit("/", 1)[0] if "/" in low else ""
    words = [w for w in re.split(r"[^a-z0-9]+", low.rsplit("/", 1)[-1]) if len(w) >= 3][:4]

    def like(s: str) -> str:
        return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

    c = notes_t.c
    cols = (c.domain, c.permalink, c.title, c.name)
    queries = []
    if folder:
        queries.append(
            select(*cols)
            .where(c.domain.in_(doms), func.lower(c.permalink).like(like(folder) + "/%", escape="\\"))
            .limit(2000)
        )
    if words:
        queries.append(
            select(*cols)
            .where(
                c.domain.in_(doms),
                or_(
                    *[
                        func.lower(col).like(f"%{like(w)}%", escape="\\")
                        for w in words
                        for col in (c.permalink, c.title)
                    ]
                ),
            )
            .limit(2000)
        )
    rows = []
    with guard:
        idx = index()
        with idx.reader.connect() as conn:
            for q in queries:
                rows.extend(conn.execute(q).all())
    keys: dict[str, tuple[str, str]] = {}
    for d, p, t, nm in rows:
        a = addr_of(d, p)
        for k in (p, nm, t, p.rsplit("/", 1)[-1]):
            if k:
                keys.setdefault(k.lower(), (a, t or p))
    out: list[tuple[str, str]] = []
    for k in difflib.get_close_matches(low, list(keys), n=n * 2, cutoff=0.5):
        if keys[k] not in out:
            out.append(keys[k])
    if len(out) < n and words:
        try:
            from geode.recall.search import search

            with guard:
                res = search(
                    settings,
                    " ".join(words),
                    limit=n,
                    mode="text",
                    domain=doms,
                    refresh=False,
                    chain=False,
                    index=index(),
                )
            for h in res["results"]:
                if (h["address"], h["title"]) not in out:
                    out.append((h["address"], h["title"]))
        except (GeodeError, SQLAlchemyError, OSError):
            pass  # the suggestions are a help, never a second error
    return out[:n]
