"""The MCP tools without MCP: :class:`Recall`, plain methods over one settings object that the
MCP layer (``geode.mcp.server``) only wraps: ``search``, ``build_context``, ``read_note``,
``recent_activity`` (and ``write_note``, from :class:`geode.mcp.write_note.NoteWriter`), the
warm-up, and the closest addresses an unknown address comes back with.

Apart from the server so that the tools can be called and tested in process, without the SDK.
"""

import difflib
import logging
import os
import re
import threading
from typing import Any

from geode.kernel.errors import GeodeError
from geode.mcp.inputs import ToolInputError, bounded, check_date, parse_where_input, strs
from geode.mcp.models import MAX_CONTENT_CHARS
from geode.mcp.write_note import NoteWriter

log = logging.getLogger("geode.mcp")


class Recall(NoteWriter):
    """The tools as plain methods over one settings object; the MCP layer only wraps them.

    One lock serialises the calls: the SDK runs synchronous tools on worker threads, and the
    recall index, the model and Chroma are used the way ``geode serve`` uses them (one request at
    a time per process).
    """

    def __init__(self, settings, session: str | None = None, background: bool = True):
        self.settings = settings
        self.session = (
            session or os.environ.get("GEODE_SESSION") or os.environ.get("CLAUDE_SESSION_ID") or f"mcp-{os.getpid()}"
        )
        self.background = background
        self.lock = threading.Lock()
        self.warm_error: str | None = None
        self._warm_thread: threading.Thread | None = None
        self._index: Any = None  # a RecallIndex, opened on first use

    def index(self):
        """One recall index for the server's life (call with the lock held): opening one per call
        re-checks the schema every time, milliseconds a warm call should not pay."""
        if self._index is None:
            from geode.recall.recall_index import RecallIndex

            self._index = RecallIndex(self.settings)
        return self._index

    # -- warm-up ---------------------------------------------------------------------------
    def start_warm(self) -> None:
        """Load the model and open Chroma and the index in a thread, now, not on the first call."""
        self._warm_thread = threading.Thread(target=self._warm, name="geode-mcp-warm", daemon=True)
        self._warm_thread.start()

    def _warm(self) -> None:
        with self.lock:
            from sqlalchemy.exc import SQLAlchemyError

            try:
                from geode.recall.search import search, semantic_for

                semantic_for(self.settings)
                search(self.settings, "warm up", limit=1, refresh=True, chain=False, index=self.index())
            except (GeodeError, SQLAlchemyError, OSError) as exc:  # the tools still answer, and say what fails
                self.warm_error = f"{type(exc).__name__}: {exc}"
                log.warning("warm-up failed: %s", self.warm_error)

    # -- search ------------------------------------------------------------------------------
    def search(
        self,
        query: str = "",
        domain=None,
        type=None,
        tag=None,
        status=None,
        where=None,
        as_of: str | None = None,
        after: str | None = None,
        limit: int = 10,
        mode: str = "hybrid",
    ) -> dict:
        from geode.recall.search import FilterError, search

        for name, value in (
            ("query", query),
            ("domain", domain),
            ("type", type),
            ("tag", tag),
            ("status", status),
            ("where", where),
            ("as_of", as_of),
            ("after", after),
            ("mode", mode),
        ):
            bounded(name, value)  # before any query: a megabyte argument is refused, never searched
        kw: dict[str, Any] = dict(
            domain=strs(domain, "domain"),
            type=strs(type, "type"),
            tags=strs(tag, "tag"),
            status=strs(status, "status"),
            where=parse_where_input(where),
            as_of=check_date("as_of", as_of),
            after=check_date("after", after),
        )
        if kw["domain"]:
            unknown = [d for d in kw["domain"] if d not in self.settings.domains]
            if unknown:
                raise ToolInputError(f"unknown domain {unknown[0]!r}; configured: {', '.join(self.settings.domains)}")
        q = (query or "").strip()
        if not q and not any(kw.values()):
            raise ToolInputError("give a query (the question in plain words) or at least one filter")
        try:
            with self.lock:
                res: dict[str, Any] = dict(
                    search(
                        self.settings,
                        q,
                        limit=int(limit),
                        mode=mode,
                        refresh=True,
                        background=self.background,
                        index=self.index(),
                        **kw,
                    )
                )
        except FilterError as exc:
            raise ToolInputError(f"filter: {exc}") from None
        if q and res.get("results"):
            from geode.delivery.search_log import record_search

            record_search(self.settings, q, res["results"], self.session)
        if res["results"]:
            nxt = "read_note the hits that look relevant before answering from them; a snippet is only a pointer"
            if any(h.get("superseded_by") for h in res["results"]):
                nxt += "; a hit with superseded_by was replaced: read the newer note"
        elif any(kw.values()):
            nxt = "nothing matched: drop a filter (as_of, status, type, tag, where) or reword the query"
        else:
            nxt = (
                "nothing matched: reword the query (other words, or the words a note would use), or use recent_activity"
            )
        res["next"] = nxt
        return res

    # -- build_context / read_note / recent_activity -----------------------------------------------
    def build_context(self, address: str, depth: int = 2, max_related: int = 10) -> dict:
        from geode.recall.context import NotFound, build_context

        bounded("address", address)
        try:
            with self.lock:
                return dict(
                    build_context(
                        self.settings, address, depth=int(depth), max_related=int(max_related), index=self.index()
                    )
                )
        except NotFound as exc:
            raise ToolInputError(self._not_found(address, str(exc))) from None
        except ValueError as exc:
            raise ToolInputError(str(exc)) from None

    def read_note(self, address: str) -> dict:
        from geode.recall.context import NotFound, read_note

        bounded("address", address)
        try:
            with self.lock:
                res: dict[str, Any] = dict(read_note(self.settings, address, index=self.index()))
        except NotFound as exc:
            raise ToolInputError(self._not_found(address, str(exc))) from None
        except OSError as exc:
            raise ToolInputError(f"{address}: the note's file cannot be read ({exc}); run `geode reindex`") from None
        from geode.delivery.search_log import record_read

        record_read(self.settings, res["domain"], res["path"], res["address"], self.session, via="mcp")
        content = res["content"]
        res["truncated"] = len(content) > MAX_CONTENT_CHARS
        if res["truncated"]:
            res["content"] = content[:MAX_CONTENT_CHARS]
        nxt = res.get("next")
        res["next"] = f"build_context {nxt['build_context']}" if nxt else None
        return res

    def recent_activity(self, period: str = "week", domain=None, limit: int = 50) -> dict:
        from geode.recall.context import recent_activity

        bounded("period", period)
        bounded("domain", domain)
        doms = strs(domain, "domain")
        if doms:
            unknown = [d for d in doms if d not in self.settings.domains]
            if unknown:
                raise ToolInputError(f"unknown domain {unknown[0]!r}; configured: {', '.join(self.settings.domains)}")
        try:
            with self.lock:
                return dict(
                    recent_activity(self.settings, period or "week", domain=doms, limit=int(limit), index=self.index())
                )
        except ValueError as exc:
            raise ToolInputError(str(exc)) from None

    def _not_found(self, address: str, why: str) -> str:
        """The error for an address that names no note, with the closest addresses."""
        close = self.closest(address)
        msg = f"no note at {address!r} ({why})."
        if close:
            msg += (
                " Closest: "
                + "; ".join(f"{a} ({t})" for a, t in close)
                + ". Call read_note with one of them, or search for the topic."
            )
        else:
            msg += " Search for the topic to find its address."
        return msg

    def closest(self, address: str, n: int = 5) -> list[tuple[str, str]]:
        """Addresses like ``address``: by spelling (permalink, name, title) among the notes of its
        folder and the notes whose permalink or title holds one of its words, then by a text
        search of its words. Candidates are chosen in SQL, so the cost does not grow with the store."""
        from sqlalchemy import func, or_, select
        from sqlalchemy.exc import SQLAlchemyError

        from geode.recall.index_tables import notes_t
        from geode.recall.recall_index import address as addr_of
        from geode.recall.recall_index import parse_address

        settings = self.settings
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
        with self.lock:
            idx = self.index()
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

                with self.lock:
                    res = search(
                        settings,
                        " ".join(words),
                        limit=n,
                        mode="text",
                        domain=doms,
                        refresh=False,
                        chain=False,
                        index=self.index(),
                    )
                for h in res["results"]:
                    if (h["address"], h["title"]) not in out:
                        out.append((h["address"], h["title"]))
            except (GeodeError, SQLAlchemyError, OSError):
                pass  # the suggestions are a help, never a second error
        return out[:n]
