"""The store as the page reads it: search with ``geode search``'s filters and facets, a note
with its binding, links, backlinks and delivery record, its neighbourhood as a graph, and what
changed lately. Reads only: the recall index (derived, refreshed from the files as ``geode
search`` refreshes it), the note files, and the ledger.

A search from the page writes no ``searched`` ledger row (``geode search`` does, for the
Gardener): a GET changes nothing, and a person browsing is not an agent looking something up.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from sqlalchemy import func, select

from geode.kernel.errors import GeodeError
from geode.recall import context as ctx
from geode.recall import search as S
from geode.recall.filters import filter_conditions
from geode.recall.index_tables import notes_t, tags_t
from geode.recall.recall_index import RecallIndex, parse_address
from geode.recall.results import split_weak

SEARCH_PER_PAGE = 20
MAX_SEARCH = 500
FACET_TAGS = 40
DELIVERY_ROWS = 20


class StoreError(GeodeError, ValueError):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _list(params, name: str) -> list[str]:
    """A repeatable query parameter (``tag=a&tag=b``), also comma-separated."""
    getlist = getattr(params, "getlist", None)
    raw = getlist(name) if getlist else ([params[name]] if params.get(name) else [])
    out: list[str] = []
    for v in raw:
        out.extend(x.strip() for x in str(v).split(",") if x.strip())
    return out


def search_kwargs(params) -> dict:
    """``geode search``'s filters from query parameters: ``domain``, ``type``, ``status``, ``tag``
    (repeatable), ``where`` (repeatable ``key=value``, ``key>=v``, ``key~v``), ``filter`` (JSON),
    ``after``, ``as_of``, ``mode`` (hybrid | text), ``blend``."""
    from geode.services.filters import parse_where

    try:
        where = parse_where(_list(params, "where"), params.get("filter") or None)
    except ValueError as exc:
        raise StoreError(str(exc)) from exc
    mode = params.get("mode") or "hybrid"
    if mode not in ("hybrid", "text", "semantic"):
        raise StoreError(f"mode {mode!r}: expected hybrid, text or semantic")
    blend = params.get("blend") or None  # None: the configured [recall] blend
    if blend is not None and blend not in ("margin", "adaptive", "rrf", "minmax", "score"):
        raise StoreError(f"blend {blend!r}: expected margin, adaptive, rrf or minmax")
    return dict(
        domain=_list(params, "domain") or None,
        type=_list(params, "type") or None,
        status=_list(params, "status") or None,
        tags=_list(params, "tag") or None,
        where=where or None,
        after=params.get("after") or None,
        as_of=params.get("as_of") or None,
        mode=mode,
        blend=blend,
    )


def _int(params, name: str, default: int, lo: int, hi: int) -> int:
    v = params.get(name)
    if v in (None, ""):
        return default
    try:
        n = int(v)
    except (TypeError, ValueError):
        raise StoreError(f"{name} must be a whole number, got {v!r}") from None
    return max(lo, min(n, hi))


class Store:
    """The recall side for one server: one index, refreshed under a lock (two threads of the
    server must not refresh the same rows at once)."""

    def __init__(self, settings, engine):
        self.settings = settings
        self.engine = engine
        self.idx = RecallIndex(settings)
        self.lock = threading.RLock()

    # -- search --------------------------------------------------------------------------------
    def search(self, params) -> dict:
        q = (params.get("q") or "").strip()
        kw = search_kwargs(params)
        page = _int(params, "page", 1, 1, 10_000)
        per = _int(params, "per_page", SEARCH_PER_PAGE, 1, 200)
        limit = min(page * per, MAX_SEARCH)
        with self.lock:
            try:
                res: dict[str, Any] = dict(S.search(self.settings, q, limit=limit, index=self.idx, refresh=True, **kw))
            except (S.FilterError, ValueError) as exc:
                raise StoreError(str(exc)) from exc
            facets = self.facets(kw)
        shown, weak = split_weak(res["results"], q) if not params.get("all") else (res["results"], 0)
        listed = len(shown) if weak else min(res["total"], MAX_SEARCH)  # weak ones sort last: none beyond
        res["results"] = shown[(page - 1) * per : page * per]
        res.update(
            weak_hidden=weak,
            page=page,
            per_page=per,
            pages=max(1, -(-listed // per)),
            facets=facets,
            filter={k: v for k, v in kw.items() if v and k not in ("mode", "blend")},
        )
        return res

    def facets(self, kw: dict) -> dict:
        """Counts by domain, type, status and tag over the notes the filters select (the query
        text ranks; the facets say what the filters hold)."""
        try:
            conds, _doms = filter_conditions(
                self.settings,
                kw.get("domain"),
                kw.get("type"),
                kw.get("status"),
                kw.get("tags"),
                kw.get("where"),
                kw.get("after"),
                kw.get("as_of"),
            )
        except (S.FilterError, ValueError) as exc:
            raise StoreError(str(exc)) from exc
        c = notes_t.c
        out: dict = {}
        with self.idx.reader.connect() as conn:
            for name, col in (("domain", c.domain), ("type", c.type), ("status", c.status)):
                rows = conn.execute(
                    select(col, func.count()).where(*conds).group_by(col).order_by(func.count().desc(), col)
                ).all()
                out[name] = [{"value": v or "", "count": int(n)} for v, n in rows]
            scope = select(c.id).where(*conds).scalar_subquery()
            rows = conn.execute(
                select(tags_t.c.tag, func.count())
                .where(tags_t.c.note_id.in_(scope))
                .group_by(tags_t.c.tag)
                .order_by(func.count().desc(), tags_t.c.tag)
                .limit(FACET_TAGS)
            ).all()
            out["tag"] = [{"value": t, "count": int(n)} for t, n in rows]
        return out

    # -- one note ------------------------------------------------------------------------------
    def address_of(self, raw: str) -> str:
        """A note address from a URL: ``geode://domain/perm`` (also with the slashes collapsed
        by a proxy), ``domain:perm``, ``domain/perm`` when ``domain`` is configured, or a bare
        permalink in the default domain. Nothing here opens a file: the note is looked up in the
        index, so no address reaches outside the store."""
        a = (raw or "").strip()
        if not a:
            raise StoreError("no note address", 400)
        if a.startswith("geode:/") and not a.startswith("geode://"):
            a = "geode://" + a[len("geode:/") :]
        if not a.startswith("geode://") and "/" in a and a.split("/", 1)[0] in self.settings.domains:
            a = "geode://" + a
        if "\x00" in a:
            raise StoreError("a note address holds no NUL byte", 400)
        return a

    def note(self, raw: str) -> dict:
        from geode.web.render import render_body

        addr = self.address_of(raw)
        with self.lock:
            try:
                n: dict[str, Any] = dict(ctx.read_note(self.settings, addr, index=self.idx, refresh=True))
            except ctx.NotFound as exc:
                raise StoreError(str(exc), 404) from exc
            except OSError as exc:
                raise StoreError(f"{addr}: cannot read the file: {exc}", 404) from exc
        from geode.kernel.note import parse_note

        parsed = parse_note(n["content"], n["path"])
        n["binding"] = binding_of(parsed, self.settings)
        n["rendered"] = render_body(parsed.body, n["links"])
        n["deliveries"] = self.deliveries(n["domain"], n["path"])
        return n

    def deliveries(self, domain: str, path: str) -> dict:
        """The note's record in the ledger: counts by kind, the first and last time, the
        latest rows (the crystal id is ``domain:path``)."""
        from geode.records.models import LedgerEvent, table_of
        from geode.web.queue import iso

        t = table_of(LedgerEvent)
        cid = f"{domain}:{path}"
        cond = t.c.crystal_id == cid
        with self.engine.connect() as conn:
            by_kind = {
                k: int(n) for k, n in conn.execute(select(t.c.kind, func.count()).where(cond).group_by(t.c.kind))
            }
            first, last = conn.execute(select(func.min(t.c.ts), func.max(t.c.ts)).where(cond)).one()
            sessions = int(conn.execute(select(func.count(func.distinct(t.c.session))).where(cond)).scalar_one())
            rows = (
                conn.execute(select(t).where(cond).order_by(t.c.ts.desc(), t.c.id.desc()).limit(DELIVERY_ROWS))
                .mappings()
                .all()
            )
        return {
            "crystal_id": cid,
            "by_kind": by_kind,
            "total": sum(by_kind.values()),
            "sessions": sessions,
            "first": iso(first),
            "last": iso(last),
            "rows": [
                {
                    "id": r["id"],
                    "ts": iso(r["ts"]),
                    "kind": r["kind"],
                    "action": r["action"],
                    "channel": r["channel"],
                    "term": r["term"],
                    "chars": r["chars"],
                    "truncated": bool(r["truncated"]),
                    "agent": r["agent"],
                    "session": r["session"],
                }
                for r in rows
            ],
        }

    # -- neighbourhood -------------------------------------------------------------------------
    def context(self, raw: str, depth: int = 2, max_related: int = 10) -> dict:
        addr = self.address_of(raw)
        if not 1 <= depth <= 3:
            raise StoreError("depth must be 1, 2 or 3")
        if not 1 <= max_related <= 100:
            raise StoreError("max_related must lie between 1 and 100")
        with self.lock:
            try:
                res: dict[str, Any] = dict(
                    ctx.build_context(self.settings, addr, depth=depth, max_related=max_related, index=self.idx)
                )
            except ctx.NotFound as exc:
                raise StoreError(str(exc), 404) from exc
            titles = self._titles(res["anchors"][:50])
        res["graph"] = graph_of(res, titles)
        return res

    def _titles(self, addresses: list[str]) -> dict[str, str]:
        out = {}
        for a in addresses:
            d, perm = parse_address(a, self.settings)
            row = ctx.find_note(self.idx, d, perm)
            out[a] = row["title"] if row else a
        return out

    def recent(self, period: str = "week", domain: str | None = None, limit: int = 50) -> dict:
        if domain and domain not in self.settings.domains:
            raise StoreError(f"unknown domain {domain!r}; known: {', '.join(self.settings.domains)}")
        with self.lock:
            try:
                return dict(
                    ctx.recent_activity(self.settings, period=period, domain=domain, limit=limit, index=self.idx)
                )
            except ValueError as exc:
                raise StoreError(str(exc)) from exc

    def counts(self) -> dict:
        with self.lock:
            self.idx.quick_refresh()
            return self.idx.counts()


def graph_of(res: dict, titles: dict[str, str]) -> dict:
    """Cytoscape.js elements for a build_context result: the anchors, the related notes, and
    for each related note the edge of its best path (from the note it was reached ``via``)."""
    nodes, edges = [], []
    seen = set()
    for a in res["anchors"][:50]:
        nodes.append({"data": {"id": a, "label": titles.get(a, a), "anchor": True, "href": _href(a)}})
        seen.add(a)
    for r in res["related"]:
        if r["address"] not in seen:
            nodes.append(
                {
                    "data": {
                        "id": r["address"],
                        "label": r["title"],
                        "anchor": False,
                        "score": r["score"],
                        "hops": r["hops"],
                        "status": r["status"] or "",
                        "href": _href(r["address"]),
                    }
                }
            )
            seen.add(r["address"])
    for r in res["related"]:
        src, dst = (r["via"], r["address"]) if r["direction"] == "out" else (r["address"], r["via"])
        if src in seen and dst in seen:
            edges.append(
                {
                    "data": {
                        "id": f"{src}->{dst}:{r['relation']}",
                        "source": src,
                        "target": dst,
                        "label": r["relation"],
                        "typed": r["relation"] not in ctx.PROSE,
                    }
                }
            )
    return {"nodes": nodes, "edges": edges}


def _href(address: str) -> str:
    from geode.web.render import note_href

    return note_href(address)


def binding_of(note, settings) -> dict | None:
    """The crystal binding as the hook reads it, and why it fires, in words."""
    crystal = note.crystal
    if crystal is None:
        return None
    from geode.delivery.binding import parse_binding

    b = parse_binding(crystal, note.fm_lines, tuple(getattr(settings, "known_agents", ()) or ()))
    why = []
    who = "every agent" if "all" in b.who else ("agents of class/type " + ", ".join(b.who) if b.who else "no agent")
    if "act" in b.deliver:
        if b.on and b.terms:
            terms = ", ".join(json.dumps(t) for t in b.terms)
            why.append(
                f"before a {' or '.join(b.on)} action whose text contains any of {terms} "
                f"(case-insensitive), to {who}, within the {settings.budget}-character budget per action"
            )
        else:
            why.append("never on an action: " + "; ".join(i.message for i in b.issues if i.severity == "error"))
    if "boot" in b.deliver:
        why.append(f"at every session start, to {who}, cut at {settings.boot_chars} characters")
    if "inject" in b.deliver:
        why.append(
            f"on a prompt{' that contains any of ' + ', '.join(json.dumps(t) for t in b.terms) if b.terms else ''}"
            f", to {who}, within the {settings.inject_budget}-character prompt budget"
        )
    if "rag" in b.deliver:
        why.append("when a search finds it (prompt-time recall)")
    return {
        "deliver": list(b.deliver),
        "on": list(b.on),
        "terms": list(b.terms),
        "who": list(b.who),
        "can_fire": b.can_fire,
        "why": why,
        "essence_chars": len(note.essence or ""),
        "issues": [{"line": i.line, "code": i.code, "severity": i.severity, "message": i.message} for i in b.issues],
    }
