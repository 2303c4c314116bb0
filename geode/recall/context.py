"""The neighbourhood of a note (build_context), one note read in full (read_note), and what
changed lately (recent_activity). All read the recall index; read_note also reads the file.

build_context's score. Every edge is walked in both directions (a note's links and its
backlinks), across domains. An edge weighs

    w = 1.0 for a typed relation (``- relates_to [[X]]``, frontmatter ``supersedes: [X]``, ...)
    w = 0.5 for a prose link (``[[X]]`` or ``[text](x.md)`` in a sentence: shown as ``links_to``)

and a neighbour's score is the sum, over every simple path of at most ``depth`` hops from the
anchor to it, of the product of the path's edge weights times 0.5 for every hop beyond the first:

    score(n) = sum over paths P (anchor -> n, |P| <= depth) of  prod(w_e for e in P) * 0.5 ** (|P| - 1)

So a typed neighbour one hop away scores 1.0, a prose one 0.5, a typed neighbour two typed hops
away 0.5, and a note reached by two independent paths scores the sum of both. At most
``PATH_CAP`` paths are followed (a guard for very dense graphs); the result says when it was hit.
``depth`` is 1 to 3 (default 2); ``max_related`` keeps the top 10 by default. No content is
returned, only titles, relation types, hops, direction and score.

An address is ``geode://domain/permalink`` (``domain:permalink`` and a bare permalink in the
default domain work too); ``geode://domain/folder/*`` anchors on every note under the folder.
"""

from __future__ import annotations

import datetime as dt
import os
import posixpath
import time
from urllib.parse import unquote

from geode.kernel.dates import DateError, parse_date
from geode.kernel.errors import NotFoundError
from geode.kernel.linkpath import markdown_candidates, markdown_rel
from geode.recall.recall_index import RecallIndex, address, parse_address
from geode.recall.results import Backlink, ContextResult, NoteLink, NoteRead, RecentActivity, RecentNote, RelatedNote
from geode.recall.sqlread import NOTE_SELECT, in_list

TYPED_WEIGHT = 1.0
PROSE_WEIGHT = 0.5
HOP_DECAY = 0.5
PATH_CAP = 20000
PROSE = ("links_to", "embeds")
PERIODS = {"day": 1, "week": 7, "fortnight": 14, "month": 30}


class NotFound(NotFoundError, LookupError):
    """No note at that address."""


def _row(conn, cond: str, params: dict) -> dict | None:
    rows = conn.rows(f"{NOTE_SELECT} WHERE {cond} ORDER BY recall_note.id LIMIT 1", params)
    return rows[0] if rows else None


def find_note(idx: RecallIndex, domain: str, perm: str) -> dict | None:
    """By permalink, then path, then name or title (case-insensitive), in ``domain``."""
    low = perm.lower()
    with idx.sql.connect() as conn:
        for cond, v in (
            ("recall_note.permalink = :v", perm),
            ("recall_note.path = :v", perm),
            ("recall_note.path = :v", perm + ".md"),
            ("lower(recall_note.permalink) = :v", low),
            ("lower(recall_note.name) = :v", low),
            ("lower(recall_note.title) = :v", low),
        ):
            r = _row(conn, f"recall_note.domain = :d AND {cond}", {"d": domain, "v": v})
            if r is not None:
                return r
    return None


def resolve_target(idx: RecallIndex, src: dict, target: str, kind: str = "", _cache: dict | None = None) -> dict | None:
    """The note a link of ``src`` points at, or None (unresolved). Same domain first, then others."""
    key = (src["domain"], posixpath.dirname(src["path"]), target, kind)
    if _cache is not None and key in _cache:
        return _cache[key]
    hit = _resolve(idx, src, target, kind)
    if _cache is not None:
        _cache[key] = hit
    return hit


def _resolve(idx: RecallIndex, src: dict, target: str, kind: str) -> dict | None:
    t = target.strip()
    if not t:
        return None
    doms = list(idx.settings.domains)
    if t.startswith("geode://") or (":" in t and t.split(":", 1)[0] in doms):
        d, p = parse_address(t, idx.settings)
        return find_note(idx, d, p) if d in doms else None
    same_path = "recall_note.domain = :d AND recall_note.path = :p"
    if kind in ("markdown", "reference") and "://" not in t:
        # a path, judged as the Librarian judges it (``geode.kernel.linkpath``): the file is
        # there or the link is unresolved, never a name lookup elsewhere (issue 24)
        rel = markdown_rel(src["path"], unquote(t))
        if rel is None:
            return None
        with idx.sql.connect() as conn:
            for cand in markdown_candidates(rel):
                r = _row(conn, same_path, {"d": src["domain"], "p": cand})
                if r is not None:
                    return r
        return None
    if t.endswith((".md", ".mdc", ".markdown")):
        rel = (
            posixpath.normpath(posixpath.join(posixpath.dirname(src["path"]), t))
            if not t.startswith("/")
            else t.lstrip("/")
        )
        with idx.sql.connect() as conn:
            r = _row(conn, same_path, {"d": src["domain"], "p": rel})
            if r is None:
                r = _row(conn, same_path, {"d": src["domain"], "p": t.lstrip("/")})
        if r is not None:
            return r
    base = t[:-3] if t.endswith(".md") else t
    for d in [src["domain"]] + [x for x in doms if x != src["domain"]]:
        r = find_note(idx, d, base)
        if r is not None:
            return r
    return None


def _candidate_targets(row: dict) -> set[str]:
    stem = row["path"].rsplit("/", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    return {
        x.lower()
        for x in (
            row["name"],
            row["permalink"],
            row["title"],
            row["path"],
            stem,
            row["path"].rsplit(".", 1)[0],
            f"geode://{row['domain']}/{row['permalink']}",
            f"{row['domain']}:{row['permalink']}",
        )
        if x
    }


def backlinks(idx: RecallIndex, row: dict, cache: dict | None = None) -> list[tuple[dict, str, int, str]]:
    """Notes linking to ``row``: (source row, relation, line, kind)."""
    names = _candidate_targets(row)
    fname = row["path"].rsplit("/", 1)[-1]
    p: dict = {"l1": f"%/{fname}", "l2": f"%{fname}"}
    named = in_list("lower(recall_link.target)", sorted(names), p, "n")
    with idx.sql.connect() as conn:
        rows = conn.all(
            "SELECT recall_link.note_id, recall_link.relation, recall_link.line, recall_link.kind, "
            f"recall_link.target FROM recall_link WHERE {named} OR recall_link.target LIKE :l1 "
            "OR recall_link.target LIKE :l2",
            p,
        )
    out = []
    src_rows = idx.notes_by_ids({r[0] for r in rows})
    for note_id, relation, line, kind, target in rows:
        src = src_rows.get(note_id)
        if src is None or src["domain"] not in idx.settings.domains:
            continue
        hit = resolve_target(idx, src, target, kind, cache)
        if hit is not None and hit["id"] == row["id"]:
            out.append((src, relation, line, kind))
    return out


def outlinks(idx: RecallIndex, row: dict) -> list:
    with idx.sql.connect() as conn:
        return conn.all(
            "SELECT line, kind, relation, target FROM recall_link WHERE note_id = :i ORDER BY line", {"i": row["id"]}
        )


def _weight(relation: str) -> float:
    return PROSE_WEIGHT if relation in PROSE else TYPED_WEIGHT


def anchors_of(idx: RecallIndex, addr: str) -> list[dict]:
    settings = idx.settings
    domain, perm = parse_address(addr, settings)
    if domain not in settings.domains:
        raise NotFound(f"{addr}: unknown domain {domain!r}; known: {', '.join(settings.domains)}")
    if perm.endswith("*"):
        prefix = perm.rstrip("*").rstrip("/")
        sql, p = f"{NOTE_SELECT} WHERE recall_note.domain = :d", {"d": domain}
        if prefix:
            sql += " AND recall_note.permalink LIKE :p ESCAPE '\\'"
            p["p"] = prefix.replace("%", r"\%").replace("_", r"\_") + "/%"
        with idx.sql.connect() as conn:
            rows = conn.rows(sql + " ORDER BY recall_note.permalink", p)
        if not rows:
            raise NotFound(f"{addr}: no note under {prefix or 'the domain root'}")
        return rows
    r = find_note(idx, domain, perm)
    if r is None:
        raise NotFound(f"{addr}: no such note")
    return [r]


def build_context(
    settings, addr: str, depth: int = 2, max_related: int = 10, index: RecallIndex | None = None, refresh: bool = True
) -> ContextResult:
    """The neighbourhood of ``addr`` (see the module docstring for the score)."""
    if not 1 <= int(depth) <= 3:
        raise ValueError("depth must be 1, 2 or 3")
    idx = index or RecallIndex(settings)
    if refresh:
        idx.quick_refresh()
    anchors = anchors_of(idx, addr)
    anchor_ids = {a["id"] for a in anchors}
    cache: dict = {}
    adj: dict[int, list] = {}
    rows: dict[int, dict] = {a["id"]: a for a in anchors}

    def edges(nid: int) -> list:
        if nid in adj:
            return adj[nid]
        row = rows[nid]
        out = []
        for _line, kind, relation, target in outlinks(idx, row):
            hit = resolve_target(idx, row, target, kind, cache)
            if hit is not None and hit["id"] != nid:
                rows.setdefault(hit["id"], hit)
                out.append((hit["id"], relation, _weight(relation), "out"))
        for src, relation, _line, _kind in backlinks(idx, row, cache):
            if src["id"] != nid:
                rows.setdefault(src["id"], src)
                out.append((src["id"], relation, _weight(relation), "in"))
        adj[nid] = out
        return out

    score: dict[int, float] = {}
    best: dict[int, tuple] = {}  # id -> (path weight, relation, direction, via id)
    hops: dict[int, int] = {}
    npaths: dict[int, int] = {}
    followed = 0
    capped = False
    stack: list[tuple[int, float, int, tuple[int, ...]]] = [(a["id"], 1.0, 0, (a["id"],)) for a in anchors]
    while stack:
        nid, w, h, path = stack.pop()
        if h >= depth:
            continue
        for other, relation, ew, direction in edges(nid):
            if other in path or other in anchor_ids:
                continue
            followed += 1
            if followed > PATH_CAP:
                capped = True
                stack = []
                break
            pw = w * ew * (HOP_DECAY if h >= 1 else 1.0)
            score[other] = score.get(other, 0.0) + pw
            npaths[other] = npaths.get(other, 0) + 1
            hops[other] = min(hops.get(other, 99), h + 1)
            if other not in best or pw > best[other][0]:
                best[other] = (pw, relation, direction, nid)
            stack.append((other, pw, h + 1, path + (other,)))
    ranked = sorted(score, key=lambda i: (-score[i], hops[i], rows[i]["title"]))
    related: list[RelatedNote] = []
    for i in ranked[:max_related]:
        r = rows[i]
        _pw, relation, direction, via = best[i]
        related.append(
            {
                "address": address(r["domain"], r["permalink"]),
                "domain": r["domain"],
                "path": r["path"],
                "title": r["title"],
                "relation": relation,
                "direction": direction,
                "via": address(rows[via]["domain"], rows[via]["permalink"]),
                "hops": hops[i],
                "paths": npaths[i],
                "score": round(score[i], 4),
                "status": r["status"] or None,
            }
        )
    return {
        "anchor": addr,
        "anchors": [address(a["domain"], a["permalink"]) for a in anchors],
        "depth": int(depth),
        "related": related,
        "total": len(score),
        "capped": capped,
        "score": "sum over paths of prod(edge weight: typed 1.0, prose 0.5) x 0.5^(hops-1)",
    }


def read_note(settings, addr: str, index: RecallIndex | None = None, refresh: bool = True) -> NoteRead:
    """The note from its file, each relation and link resolved or not, a backlinks summary, and the
    build_context anchor to run next when the note has neighbours."""
    from geode.kernel.note import parse_note

    idx = index or RecallIndex(settings)
    if refresh:
        idx.quick_refresh()
    domain, perm = parse_address(addr, settings)
    if domain not in settings.domains:
        raise NotFound(f"{addr}: unknown domain {domain!r}")
    row = find_note(idx, domain, perm)
    if row is None:
        raise NotFound(f"{addr}: no such note")
    full = os.path.join(settings.domains[domain], row["path"])
    with open(full, encoding="utf-8") as fh:
        text_ = fh.read()
    note = parse_note(text_, row["path"])
    cache: dict = {}
    links: list[NoteLink] = []
    for lk in note.links:
        hit = resolve_target(idx, row, lk.target, lk.kind, cache) if lk.target else row
        links.append(
            {
                "relation": lk.relation,
                "kind": lk.kind,
                "target": lk.target or f"#{lk.anchor}",
                "line": lk.line,
                "resolved": hit is not None,
                "address": address(hit["domain"], hit["permalink"]) if hit else None,
                "title": hit["title"] if hit else None,
            }
        )
    for key in ("supersedes", "superseded_by", "relates_to", "depends_on", "part_of"):
        val = note.frontmatter.get(key)
        for t in [] if val in (None, "") else (val if isinstance(val, list) else [val]):
            t = str(t).strip().strip("[]")
            hit = resolve_target(idx, row, t, "frontmatter", cache)
            links.append(
                {
                    "relation": key,
                    "kind": "frontmatter",
                    "target": t,
                    "line": note.line_of(key),
                    "resolved": hit is not None,
                    "address": address(hit["domain"], hit["permalink"]) if hit else None,
                    "title": hit["title"] if hit else None,
                }
            )
    back = backlinks(idx, row, cache)
    by_rel: dict[str, int] = {}
    for _s, rel, _l, _k in back:
        by_rel[rel] = by_rel.get(rel, 0) + 1
    seen = set()
    back_from: list[Backlink] = []
    for src, rel, line, _k in back:
        a = address(src["domain"], src["permalink"])
        if (a, rel) in seen:
            continue
        seen.add((a, rel))
        back_from.append({"address": a, "title": src["title"], "relation": rel, "line": line})
    me = address(domain, row["permalink"])
    has_neighbours = any(x["resolved"] and x["address"] != me for x in links) or bool(back)
    return {
        "address": me,
        "domain": domain,
        "path": row["path"],
        "title": row["title"],
        "status": row["status"] or None,
        "type": row["type"] or None,
        "frontmatter": note.frontmatter,
        "content": text_,
        "observations": [{"line": o.line, "category": o.category, "text": o.text} for o in note.observations],
        "links": links,
        "unresolved": sum(1 for x in links if not x["resolved"]),
        "backlinks": {"count": len(back), "by_relation": by_rel, "from": back_from[:20]},
        "next": {"build_context": me, "command": f"geode context {me}"} if has_neighbours else None,
    }


def parse_period(period: str | None, now: float | None = None) -> tuple[float, str]:
    """``day``/``week``/``fortnight``/``month``, ``Nh``/``Nd``/``Nw``, or an ISO date -> (since, label)."""
    now = time.time() if now is None else now
    p = (period or "week").strip().lower()
    if p in PERIODS:
        return now - PERIODS[p] * 86400, p
    unit = {"h": 3600, "d": 86400, "w": 7 * 86400}
    if p[-1:] in unit and p[:-1].replace(".", "", 1).isdigit():
        return now - float(p[:-1]) * unit[p[-1]], p
    try:
        d = parse_date(p, "period")  # strict, as every room reads dates: 2024-6-1 is not one
    except DateError:
        raise ValueError(
            f"period {period!r}: use day, week, fortnight, month, Nh, Nd, Nw or a date (YYYY-MM-DD)"
        ) from None
    return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp(), f"since {d.isoformat()}"


def recent_activity(
    settings,
    period: str = "week",
    domain=None,
    limit: int = 50,
    index: RecallIndex | None = None,
    refresh: bool = True,
    now: float | None = None,
) -> RecentActivity:
    """Notes changed within the period, newest first, across domains (or ``domain``)."""
    idx = index or RecallIndex(settings)
    if refresh:
        idx.quick_refresh()
    from sqlalchemy import func, select

    from geode.recall.index_tables import notes_t

    since, label = parse_period(period, now)
    doms = [domain] if isinstance(domain, str) else list(domain or settings.domains)
    c = notes_t.c
    cond = (c.domain.in_(doms)) & (c.mtime_ns >= int(since * 1e9))
    with idx.reader.connect() as conn:
        total = conn.execute(select(func.count()).select_from(notes_t).where(cond)).scalar_one()
        rows = (
            conn.execute(select(notes_t).where(cond).order_by(c.mtime_ns.desc(), c.path).limit(limit)).mappings().all()
        )
        per = conn.execute(select(c.domain, func.count()).where(cond).group_by(c.domain)).all()
    results: list[RecentNote] = []
    for r in rows:
        when = dt.datetime.fromtimestamp(r["mtime_ns"] / 1e9, dt.UTC)
        results.append(
            {
                "address": address(r["domain"], r["permalink"]),
                "domain": r["domain"],
                "path": r["path"],
                "title": r["title"],
                "date": when.isoformat(timespec="seconds"),
                "status": r["status"] or None,
                "type": r["type"] or None,
                "recorded": r["recorded"],
            }
        )
    return {
        "period": label,
        "since": dt.datetime.fromtimestamp(since, dt.UTC).isoformat(timespec="seconds"),
        "results": results,
        "total": int(total),
        "by_domain": {d: int(n) for d, n in per},
    }


__all__ = ["build_context", "read_note", "recent_activity", "resolve_target", "NotFound"]
