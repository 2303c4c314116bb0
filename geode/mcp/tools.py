"""The MCP tools without MCP: :class:`Recall`, plain methods over one settings object that the
MCP layer (``geode.mcp.server``) only wraps: ``search``, ``build_context``, ``read_note``,
``recent_activity`` (and ``write_note``, from :class:`geode.mcp.write_note.NoteWriter`), the
warm-up, and the closest addresses an unknown address comes back with.

Apart from the server so that the tools can be called and tested in process, without the SDK.
"""

import logging
import os
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
        from geode.recall.results import split_weak

        res["results"], res["weak_hidden"] = split_weak(res["results"], q)  # the floor the CLI and page use
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
        """Addresses like ``address`` (``geode.recall.closest``), read through this server's index."""
        from geode.recall.closest import closest

        return closest(self.settings, self.index, address, n, lock=self.lock)
