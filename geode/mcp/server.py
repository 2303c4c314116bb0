"""``geode mcp``: recall as Model Context Protocol tools, with the routing that makes them work.

Why: delivery pushes notes to the agent; recall must be pulled, and an agent that can pull only by
running ``geode search`` in its shell fails where the shell lacks the virtual environment and gets
a text table to parse. Every peer of this field (basic-memory, claude-mem) gives the agent recall
as MCP tools; so does this module, on the official Python SDK (``mcp``, v2: ``MCPServer``).

The tools are thin wrappers of the Python API the CLI uses (``geode.recall.search.search``,
``geode.recall.context.build_context`` / ``read_note`` / ``recent_activity``), with typed inputs
(JSON schemas the client validates against) and structured outputs (pydantic models, sent as
``structuredContent`` and as JSON text):

- ``search``: hybrid search with the filters of ``geode search``;
- ``build_context``: a note's neighbourhood (links and backlinks, 1 to 3 hops);
- ``read_note``: one note in full, its links resolved, its backlinks;
- ``recent_activity``: what changed lately;
- ``write_note``: a new note, linted first; a change to an existing note is filed as a proposal
  in the approval queue (never an overwrite).

Routing travels with the server: :func:`instructions` (sent on initialize) and each tool's
description say when to use which tool, and list the configured domains with one line each on
what they hold (``[domains_about]`` in ``geode.toml``, else the domain's top folders).

Errors are tool errors (``isError``) with a message the agent can act on: an unknown address comes
back with the closest addresses, a filter that cannot be parsed says what is wrong. Nothing a
caller sends takes the server down; an unexpected failure is reported as a tool error too.

Ledger: a search with query text leaves a ``searched`` row (as ``geode search`` does, the Gardener
reads them), ``read_note`` a ``read`` row (the Cleaner counts it as use), ``write_note`` a
``write_requested`` row that the proposal it files cites as evidence.

No ``from __future__ import annotations`` here: the SDK reads the tools' annotations at run time,
and they name values local to ``build_server`` (the configured domains).

Warm-up: the model, Chroma and the index load in a background thread as soon as the server
serves, while the client runs its handshake; the first tool call waits for it
(``bench/mcp_speed.py`` measures start-up and call latency).
"""

import difflib
import hashlib
import logging
import os
import re
import threading
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from geode.delivery.config import ConfigError
from geode.delivery.errors import GeodeError, UsageError
from geode.web.security import Guard as PageGuard

log = logging.getLogger("geode.mcp")

SERVER_NAME = "geode"
#: ``read_note`` returns at most this many characters of a note's file (a note is short; a
#: megabyte-long file would flood the agent's context). ``truncated`` says when it was cut.
MAX_CONTENT_CHARS = 60_000
#: What ``write_note`` accepts as a body (the store's per-file limit applies too).
MAX_BODY_CHARS = 200_000
WRITE_KIND = "write_requested"
PROPOSAL_AGENT = "mcp"

ROUTING = """\
geode holds this project's notes: decisions, runbooks, facts and lessons written down so that
nobody has to rediscover them. Recall them with these tools before you guess, grep or ask.

When to use which tool:
1. A question about how, why or what in this project: call `search` first, with the question in
   plain words. Any language works (a German note answers an English question).
2. A hit's snippet is a pointer, not the answer: call `read_note` on the hit's address before you
   answer from it or act on it.
3. For what holds now, pass status="stable" (it keeps only notes marked stable; notes without a
   status drop out, so use it where the domain marks status). A retired note ranks lower and its
   `superseded_by` names the note that replaced it: read that one.
4. Set `as_of` (a validity window) only when the question names a bounded date ("what applied on
   2025-03-01"), and only on the first search; otherwise leave it out.
5. To follow a hit's neighbourhood (what it relates to, depends on, supersedes, what links to
   it), call `build_context` on its address.
6. "What changed lately": `recent_activity`. Something worth keeping for next time:
   `write_note` (a new note is written at once; a change to an existing note is filed as a
   proposal that a person approves).
"""


class ToolInputError(UsageError, ValueError):
    """Bad input to a tool; the message tells the agent what to change (a tool error, never a
    crashed server; ``geode mcp --host`` raises it too, a usage error with status 2)."""


# -- domains -----------------------------------------------------------------------------------
def domains_about(settings) -> dict[str, str]:
    """``[domains_about]`` of ``geode.toml`` (``name = "one line on what the domain holds"``),
    checked and read once with the rest of the settings; empty for a one-off store."""
    return dict(getattr(settings, "domains_about", None) or {})


def _top_folders(root: str, n: int = 8) -> list[str]:
    try:
        names = sorted(
            e.name for e in os.scandir(root) if e.is_dir(follow_symlinks=False) and not e.name.startswith((".", "_"))
        )
    except OSError:
        return []
    return names[:n] + (["..."] if len(names) > n else [])


def domain_lines(settings) -> list[dict]:
    """One entry per configured domain: its name, one line on what it holds (configured, else its
    top folders), and whether it is the default."""
    about = domains_about(settings)
    out = []
    for name, root in settings.domains.items():
        line = about.get(name, "")
        if not line:
            folders = _top_folders(root)
            line = (
                "folders " + ", ".join(f + "/" for f in folders) if folders else "notes at the top level"
            ) + " (no description: add one under [domains_about] in geode.toml)"
        out.append({"name": name, "about": line, "default": name == settings.default_domain})
    return out


def instructions(settings) -> str:
    """The routing guidance and the domain list, sent to the client on initialize."""
    lines = [ROUTING, "Domains (address notes as geode://<domain>/<permalink>):"]
    for d in domain_lines(settings):
        lines.append(f"- {d['name']}{' (default)' if d['default'] else ''}: {d['about']}")
    return "\n".join(lines) + "\n"


# -- structured outputs -------------------------------------------------------------------------
class SearchHit(BaseModel):
    address: str = Field(description="geode://domain/permalink: pass it to read_note or build_context")
    domain: str
    path: str = Field(description="the file, relative to the domain's root")
    title: str
    score: float
    snippet: str = Field(description="a window around the match: a pointer, read the note before answering")
    line: int | None = Field(description="file line of the observation the hit is in, or null")
    status: str | None = None
    type: str | None = None
    supersedes: list[str] = []
    superseded_by: list[str] = Field(default=[], description="newer notes that replace this one: read those")


class SearchOut(BaseModel):
    query: str
    results: list[SearchHit]
    total: int = Field(description="how many notes matched in all (results holds the top `limit`)")
    mode: str = Field(description="hybrid, or text when no vector exists yet")
    pending: int = Field(description="notes in scope not embedded yet (found by text alone until then)")
    notice: str
    next: str = Field(description="what to do with these results")


class Related(BaseModel):
    address: str
    domain: str
    path: str
    title: str
    relation: str
    direction: Literal["out", "in"]
    via: str
    hops: int
    paths: int
    score: float
    status: str | None = None


class ContextOut(BaseModel):
    anchor: str
    anchors: list[str]
    depth: int
    related: list[Related]
    total: int
    capped: bool
    score: str = Field(description="how a neighbour's score is computed")


class Observation(BaseModel):
    line: int
    category: str
    text: str


class LinkOut(BaseModel):
    relation: str
    kind: str
    target: str
    line: int
    resolved: bool
    address: str | None = None
    title: str | None = None


class Backlink(BaseModel):
    address: str
    title: str
    relation: str
    line: int | None = None


class Backlinks(BaseModel):
    count: int
    by_relation: dict[str, int]
    sources: list[Backlink] = Field(alias="from")


class NoteOut(BaseModel):
    address: str
    domain: str
    path: str
    title: str
    status: str | None = None
    type: str | None = None
    frontmatter: dict[str, Any]
    content: str = Field(description="the note's file")
    truncated: bool = Field(description=f"true when content was cut at {MAX_CONTENT_CHARS:,} characters")
    observations: list[Observation]
    links: list[LinkOut]
    unresolved: int
    backlinks: Backlinks
    next: str | None = Field(description="build_context on this address when the note has neighbours")


class RecentNote(BaseModel):
    address: str
    domain: str
    path: str
    title: str
    date: str
    status: str | None = None
    type: str | None = None


class RecentOut(BaseModel):
    period: str
    since: str
    results: list[RecentNote]
    total: int
    by_domain: dict[str, int]


class LintProblem(BaseModel):
    line: int
    code: str
    severity: str
    message: str


class LintOut(BaseModel):
    errors: int
    warnings: int
    problems: list[LintProblem]


class Crystal(BaseModel):
    """A binding: deliver the note's essence to the agent when an action matches."""

    deliver: str | list[str] = Field(default="act", description="act | boot | inject | rag (or a list)")
    on: str | list[str] = Field(default="bash", description="bash | write | edit | read | commit (or a list)")
    match: str | None = Field(default=None, description="comma-separated substrings of the action's text")
    who: str | None = Field(default=None, description="which class of agent receives it (default all)")


class WriteOut(BaseModel):
    outcome: Literal["written", "proposed", "already_proposed"]
    address: str
    domain: str
    path: str
    proposal_id: int | None = Field(description="the approval queue's id when a change was filed")
    lint: LintOut
    message: str


# -- small helpers ------------------------------------------------------------------------------
def _strs(value, name: str) -> list[str] | None:
    """A string or a list of strings -> a list (None when empty)."""
    if value is None or value == "" or value == []:
        return None
    items = [value] if isinstance(value, str) else list(value)
    out = []
    for v in items:
        if not isinstance(v, str) or not v.strip():
            raise ToolInputError(f"{name}: expected text or a list of text, got {v!r}")
        out.append(v.strip())
    return out


def _check_date(name: str, value: str | None) -> str | None:
    """A date argument as ``YYYY-MM-DD`` (geode's one reading of dates, ``geode.delivery.dates``)."""
    from geode.delivery.dates import DateError, optional_date

    try:
        day = optional_date(value, name)
    except DateError as exc:
        raise ToolInputError(str(exc)) from None
    return day.isoformat() if day is not None else None


def parse_where_input(where) -> dict | None:
    """``where`` as the agent gives it: ``"key=value"`` expressions (a string or a list of them,
    the mini-language of ``geode search --where``), or a JSON filter object (``--filter``)."""
    from geode.cli.recall_cmds import parse_where

    if where is None or where == "" or where == [] or where == {}:
        return None
    if isinstance(where, dict):
        return dict(where)
    items = [where] if isinstance(where, str) else list(where)
    out: dict = {}
    for item in items:
        if not isinstance(item, str):
            raise ToolInputError(f"where: expected text like 'key=value' or a JSON object, got {item!r}")
        s = item.strip()
        try:
            part = parse_where([], s) if s.startswith("{") else parse_where([s], None)
        except ValueError as exc:
            msg = str(exc).replace("--where ", "").replace("--filter", "the JSON filter")
            msg = msg[len(repr(s)) + 2 :] if msg.startswith(repr(s) + ": ") else msg
            raise ToolInputError(
                f"where {item!r}: {msg}. Forms: key=value, key=[a,b] (any of), key~value (a list holds it), "
                'key>=value, key<value, key!=value, or a JSON object such as {"tags": {"$contains_any": ["a", "b"]}}'
            ) from None
        out.update(part)
    return out


def slugify(title: str) -> str:
    """A file name from a title: accents folded, lower case, words joined by ``-``."""
    s = unicodedata.normalize("NFKD", title)
    s = "".join(c for c in s if not unicodedata.combining(c)).lower()
    s = re.sub(r"[^\w\s-]", " ", s)
    s = re.sub(r"[\s_-]+", "-", s).strip("-")
    return s[:80].strip("-") or "note"


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def check_keys(data: dict, where: str = "frontmatter", depth: int = 0) -> None:
    """Keys an agent may give: plain names (a dot would name a nested key to the editor), at
    most three levels deep; values of the kinds a note holds."""
    if depth > 2:
        raise ToolInputError(f"{where}: nested deeper than three levels")
    for key, val in data.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ToolInputError(f"{where} key {key!r}: letters, digits, '_' and '-' only, starting with a letter")
        if isinstance(val, dict):
            check_keys(val, f"{where}.{key}", depth + 1)
        elif isinstance(val, list):
            if any(isinstance(x, (dict, list)) or x is None for x in val):
                raise ToolInputError(f"{where}.{key}: a list holds text, numbers or true/false only")
        elif val is not None and not isinstance(val, (str, int, float, bool)):
            raise ToolInputError(f"{where}.{key}: unsupported value {val!r}")


def frontmatter_text(meta: dict) -> str:
    """``---`` + the keys of ``meta`` in order + ``---``, written by geode's one frontmatter
    editor (``geode.delivery.frontmatter_edit.set_key``), which proves each key reads back as
    given through the reader every room uses; a value it cannot write is a tool error."""
    from geode.delivery.frontmatter_edit import FrontmatterEditError, set_key

    check_keys(meta)
    data = b""
    try:
        for key, val in meta.items():
            if val is not None:
                data = set_key(data, key, val, path="the new note")
    except FrontmatterEditError as exc:
        raise ToolInputError(str(exc)) from None
    return data.decode("utf-8") if data else "---\n---\n"


def _normal(v):
    """What the frontmatter parser reads back for a value we wrote (for the round-trip check)."""
    if isinstance(v, dict):
        return {k: _normal(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_normal(x) for x in v]
    return v


def _safe_folder(folder: str) -> str:
    from geode.agents import safepath

    f = (folder or "").strip()
    if f.startswith(("/", "~")):
        raise ToolInputError(f"folder {folder!r}: give a folder relative to the domain's root, e.g. ops/ci")
    f = f.strip("/")
    if not f:
        return ""
    try:
        parts = safepath.split(f + "/x.md")[:-1]
    except safepath.UnsafePath as exc:
        raise ToolInputError(f"folder {folder!r}: {exc.reason}; give a folder relative to the domain's root") from None
    hidden = [p for p in parts if p.startswith(".")]
    if hidden:
        raise ToolInputError(f"folder {folder!r}: a hidden folder ({hidden[0]}) is not part of the store")
    return "/".join(parts)


#: What the agent can change when lint refuses a note (codes of ``geode.delivery.lint``).
_LINT_HINTS = {
    "no-essence": " (pass essence: the text to deliver when the binding fires)",
    "empty-essence": " (pass a non-empty essence)",
    "essence-over-budget": " (shorten essence; the details belong in body)",
}


# -- the tools, without MCP ---------------------------------------------------------------------
class Recall:
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
        self._index = None

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

        kw = dict(
            domain=_strs(domain, "domain"),
            type=_strs(type, "type"),
            tags=_strs(tag, "tag"),
            status=_strs(status, "status"),
            where=parse_where_input(where),
            as_of=_check_date("as_of", as_of),
            after=_check_date("after", after),
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
                res = search(
                    self.settings,
                    q,
                    limit=int(limit),
                    mode=mode,
                    refresh=True,
                    background=self.background,
                    index=self.index(),
                    **kw,
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

        try:
            with self.lock:
                return build_context(
                    self.settings, address, depth=int(depth), max_related=int(max_related), index=self.index()
                )
        except NotFound as exc:
            raise ToolInputError(self._not_found(address, str(exc))) from None
        except ValueError as exc:
            raise ToolInputError(str(exc)) from None

    def read_note(self, address: str) -> dict:
        from geode.recall.context import NotFound, read_note

        try:
            with self.lock:
                res = read_note(self.settings, address, index=self.index())
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

        doms = _strs(domain, "domain")
        if doms:
            unknown = [d for d in doms if d not in self.settings.domains]
            if unknown:
                raise ToolInputError(f"unknown domain {unknown[0]!r}; configured: {', '.join(self.settings.domains)}")
        try:
            with self.lock:
                return recent_activity(
                    self.settings, period or "week", domain=doms, limit=int(limit), index=self.index()
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

        from geode.recall.recall_index import address as addr_of
        from geode.recall.recall_index import notes_t, parse_address

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

    # -- write_note ----------------------------------------------------------------------------
    def write_note(
        self,
        title: str,
        body: str,
        folder: str = "",
        domain: str | None = None,
        frontmatter: dict | None = None,
        crystal: dict | None = None,
        essence: str | None = None,
    ) -> dict:
        from geode.agents import proposals, safepath
        from geode.delivery.lint import lint_note
        from geode.delivery.note import ESSENCE_CLOSE, ESSENCE_OPEN, parse_note
        from geode.recall.recall_index import address as addr_of

        settings = self.settings
        title = " ".join((title or "").split())
        if not title:
            raise ToolInputError("title: give the note a title (one line)")
        if not (body or "").strip() and not (essence or "").strip():
            raise ToolInputError("body: a note needs a body")
        if len(body or "") > MAX_BODY_CHARS:
            raise ToolInputError(f"body: {len(body):,} characters; a note holds at most {MAX_BODY_CHARS:,}")
        domain = domain or settings.default_domain
        if domain not in settings.domains:
            raise ToolInputError(f"unknown domain {domain!r}; configured: {', '.join(settings.domains)}")
        sub = _safe_folder(folder)
        fm = dict(frontmatter or {})
        for k in ("title", "crystal"):
            if k in fm:
                raise ToolInputError(f"frontmatter: pass {k} as the {k} argument, not inside frontmatter")
        meta: dict = {"title": title, **fm}
        if crystal:
            meta["crystal"] = {k: v for k, v in dict(crystal).items() if v not in (None, "", [])}
        if (body or "").lstrip("\ufeff").startswith("---"):
            raise ToolInputError(
                "body: it starts with '---', a frontmatter of its own; pass those keys as "
                "frontmatter and the text after the closing '---' as body"
            )
        text = frontmatter_text(meta)
        if essence is not None and essence.strip():
            if ESSENCE_OPEN in (body or ""):
                raise ToolInputError("essence: the body already holds essence markers; give one or the other")
            text += f"{ESSENCE_OPEN}\n{essence.strip()}\n{ESSENCE_CLOSE}\n\n"
        text += (body or "").strip("\n") + "\n"

        root = settings.domains[domain]
        rel = f"{sub}/{slugify(title)}.md" if sub else f"{slugify(title)}.md"
        existing = self._existing(domain, sub, rel, title)
        target = existing or rel
        note = parse_note(text, target)
        if note.frontmatter != _normal(meta):  # what we wrote must read back as what was meant
            raise ToolInputError(
                f"frontmatter: it would not read back as given ({note.frontmatter!r}); "
                "simplify the values (text, numbers, lists of text)"
            )
        problems = lint_note(note, settings, domain)
        lint = {
            "errors": sum(1 for p in problems if p.severity == "error"),
            "warnings": sum(1 for p in problems if p.severity == "warning"),
            "problems": [
                {"line": p.line, "code": p.code, "severity": p.severity, "message": p.message} for p in problems
            ],
        }
        if lint["errors"]:
            listed = "; ".join(
                f"line {p['line']}: {p['message']} [{p['code']}]{_LINT_HINTS.get(p['code'], '')}"
                for p in lint["problems"]
                if p["severity"] == "error"
            )
            raise ToolInputError(f"not written: lint found {lint['errors']} error(s): {listed}")
        data = text.encode("utf-8")
        if len(data) > settings.max_file_bytes:
            raise ToolInputError(f"body: {len(data):,} bytes, over the store's limit of {settings.max_file_bytes:,}")

        if existing is None:
            try:
                with self.lock:
                    created = _create_file(root, rel, data)
            except safepath.UnsafePath as exc:
                raise ToolInputError(f"folder {folder!r}: {exc.reason}") from None
            if created:
                from sqlalchemy.exc import SQLAlchemyError

                with self.lock:  # findable by text at once (the next search refreshes this folder too)
                    try:
                        self.index().quick_refresh()
                    except (GeodeError, SQLAlchemyError, OSError) as exc:
                        log.warning("the index was not refreshed after writing %s: %s", rel, exc)
                note2 = parse_note(text, rel)
                return {
                    "outcome": "written",
                    "address": addr_of(domain, note2.permalink),
                    "domain": domain,
                    "path": rel,
                    "proposal_id": None,
                    "lint": lint,
                    "message": f"written to {rel} in domain {domain}",
                }
            target = rel  # created by someone else between our look and our write: propose instead

        # an existing note: never overwritten; the change goes to the approval queue
        cur = proposals.current(settings, domain, target)
        if cur is not None and cur[0] == data:
            raise ToolInputError(f"{target} already holds exactly this text; nothing to change")
        pid, fresh = self._propose(domain, target, data, title)
        note2 = parse_note(text, target)
        verb = "filed" if fresh else "was already filed"
        return {
            "outcome": "proposed" if fresh else "already_proposed",
            "address": addr_of(domain, note2.permalink),
            "domain": domain,
            "path": target,
            "proposal_id": pid,
            "lint": lint,
            "message": (
                f"{target} exists, so it was not overwritten: the change {verb} as proposal {pid} in "
                f"the approval queue; a person approves it with `geode proposals approve {pid}`"
            ),
        }

    def _existing(self, domain: str, sub: str, rel: str, title: str) -> str | None:
        """The note this write would change: the file at ``rel``, or a note in the same folder
        with the same title (case-insensitive)."""
        from sqlalchemy import func, select

        from geode.agents import proposals
        from geode.recall.recall_index import notes_t

        if proposals.current(self.settings, domain, rel) is not None:
            return rel
        c = notes_t.c
        with self.lock:
            idx = self.index()
            idx.quick_refresh()
            with idx.reader.connect() as conn:
                rows = conn.execute(
                    select(c.path).where(c.domain == domain, func.lower(c.title) == title.lower()).order_by(c.path)
                ).all()
        for (path,) in rows:
            folder_of = path.rsplit("/", 1)[0] if "/" in path else ""
            if folder_of == sub and proposals.current(self.settings, domain, path) is not None:
                return path
        return None

    def _propose(self, domain: str, path: str, data: bytes, title: str) -> tuple[int, bool]:
        """File an edit proposal citing a ``write_requested`` ledger row; (id, newly filed)."""
        from sqlalchemy import select

        from geode.agents import proposals
        from geode.delivery import ledger, models

        settings = self.settings
        engine = proposals.open_queue(settings)
        run_id = f"mcp:{self.session}"[:255]
        key = f"write_note:{domain}:{path}:{hashlib.sha256(data).hexdigest()[:16]}"[:255]
        P = proposals.P
        with engine.connect() as conn:  # the same change asked for again in this session: the same proposal
            known = conn.execute(select(P.c.id).where(P.c.run_id == run_id, P.c.key == key)).scalar()
        if known is not None:
            return int(known), False
        ev = ledger.new_event(
            WRITE_KIND,
            session=self.session,
            domain=domain,
            crystal_id=f"{domain}:{path}",
            path=path,
            action="write",
            channel="mcp",
            detail={"title": title, "sha256": hashlib.sha256(data).hexdigest(), "via": "mcp"},
        )
        models.insert_events(engine, [ev])
        t = models.LedgerEvent.__table__
        with engine.connect() as conn:
            eid = conn.execute(select(t.c.id).where(t.c.event_id == ev["event_id"])).scalar_one()
        try:
            change = proposals.edit_change(settings, domain, path, data)
            draft = proposals.ProposalDraft(
                agent=PROPOSAL_AGENT,
                kind="edit",
                domain=domain,
                title=f"Update {path}: {title}"[:500],
                rationale="An agent asked write_note to change this existing note; write_note never overwrites, "
                "so the change waits here for a person.",
                evidence=[{"ledger_event": int(eid)}],
                changes=[change],
                run_id=run_id,
                key=key,
            )
            pid = proposals.file_proposal(settings, engine, draft)
        except proposals.ProposalError as exc:
            raise ToolInputError(f"{path}: the change could not be filed: {exc}") from None
        if pid is not None:
            return pid, True
        with engine.connect() as conn:
            return int(conn.execute(select(P.c.id).where(P.c.run_id == run_id, P.c.key == key)).scalar_one()), False


def _create_file(root: str, rel: str, data: bytes) -> bool:
    """Create ``rel`` under ``root`` with ``data``, never replacing a file; False when it exists.

    Written to a temp file in the same folder, fsynced, then hard-linked into place: ``link(2)``
    fails when the name exists, so a file created meanwhile by anyone else is never overwritten.
    The folder walk refuses symlinks (``safepath.open_parent``). A filesystem without hard links
    gets ``O_CREAT | O_EXCL`` on the name itself (no overwrite either; not atomic against a crash).
    """
    from geode.agents import safepath
    from geode.agents.apply import default_mode

    dirfd, leaf = safepath.open_parent(root, rel, create=True)
    try:
        if safepath.leaf_stat(dirfd, leaf, rel) is not None:
            return False
        tmp = f".{leaf}.geode-{os.getpid()}-{os.urandom(4).hex()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(tmp, flags, 0o600, dir_fd=dirfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, default_mode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, leaf, src_dir_fd=dirfd, dst_dir_fd=dirfd, follow_symlinks=False)
            except FileExistsError:
                return False
            except OSError:  # no hard links here (some network and FAT filesystems)
                try:
                    fd2 = os.open(leaf, flags, default_mode(), dir_fd=dirfd)
                except FileExistsError:
                    return False
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd2, view) :]
                    os.fsync(fd2)
                finally:
                    os.close(fd2)
        finally:
            try:
                os.unlink(tmp, dir_fd=dirfd)
            except FileNotFoundError:
                pass
        os.fsync(dirfd)
        return True
    finally:
        os.close(dirfd)


# -- the MCP layer -----------------------------------------------------------------------------
SEARCH_DOC = """\
Search this project's notes by meaning and by words. Call it FIRST for any question about how,
why or what in this project, with the question in plain words (any language).
Returns hits with address, domain, title, score, snippet and line. A snippet is a pointer, not the
answer: call read_note on a hit before you answer from it. Filters (all optional, combined with
AND): domain; type; tag (all must hold); status ("stable" for what holds now; it drops notes
without a status); where (frontmatter: "key=value", "key=[a,b]", "key~value", "key>=value",
"key!=value", or a JSON object like {"tags": {"$contains_any": ["a","b"]}}); as_of (YYYY-MM-DD:
notes valid on that date; only for a question that names a bounded date, and only on the first
search); after (recorded on or after a date); limit; mode (hybrid, text, semantic).
Without a query, lists what the filters select."""

CONTEXT_DOC = """\
The neighbourhood of a note: the notes it links to and that link to it (typed relations such as
relates_to, depends_on, supersedes, and prose links), up to `depth` hops, best first. Use it to
follow a search hit's neighbourhood. `address` is a hit's address (geode://domain/permalink), or
geode://domain/folder/* for every note under a folder. Titles and relations only: read_note the
ones you need."""

READ_DOC = """\
Read one note in full: its file's content, frontmatter, observations, each link resolved (or not)
and who links to it. Call it on a search hit before answering from it. `address` is
geode://domain/permalink (domain:permalink or a bare permalink in the default domain work too).
An unknown address returns the closest addresses."""

RECENT_DOC = """\
What changed lately: notes whose files changed within `period` (day, week, fortnight, month, Nh,
Nd, Nw, or a date YYYY-MM-DD meaning since that date), newest first, across domains or in the
ones named."""

WRITE_DOC = """\
Record something worth keeping for next time (a decision, a fix that worked, a fact about this
project) as a note. Writes a NEW note at <folder>/<title as a file name>.md in the domain, after
linting it; lint errors refuse the write and say what to fix. It never overwrites: when that note
(or one with the same title in the folder) exists, the new text is filed as a proposal in the
approval queue for a person to approve, and the result gives its id. Optional: frontmatter
(description, type, tags, status, ...); crystal (a binding that delivers the note when an action
matches: deliver, on, match) with essence (the text delivered, about 1,500 characters at most)."""


def build_server(settings, recall: Recall | None = None, warm: bool = False):
    """The ``MCPServer`` with the five tools over ``recall``.

    ``warm``: start loading the model, Chroma and the index when the server starts serving (its
    lifespan runs once the transport holds stdin/stdout, so nothing the warm-up prints can reach
    the wire), while the client is still in its handshake.
    """
    from contextlib import asynccontextmanager

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    recall = recall or Recall(settings)

    @asynccontextmanager
    async def lifespan(_server):
        if warm:
            recall.start_warm()
        yield {}

    server = MCPServer(
        SERVER_NAME, instructions=instructions(settings), log_level="WARNING", version=_version(), lifespan=lifespan
    )
    domains = ", ".join(settings.domains)

    def guarded(fn, *a, **kw):
        try:
            return fn(*a, **kw)
        except ConfigError as exc:
            raise ToolError(f"configuration: {exc}") from None
        except GeodeError as exc:  # said for a person (bad input, not found, a part unavailable): said as is
            raise ToolError(str(exc)) from None
        except Exception as exc:  # tool boundary: a bug becomes a tool error, logged; the server keeps answering
            log.exception("%s failed", fn.__name__)
            raise ToolError(
                f"{fn.__name__} failed: {type(exc).__name__}: {exc}. The server keeps running; "
                "`geode status` shows whether the index needs `geode reindex`."
            ) from None

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(name="search", description=SEARCH_DOC, annotations=read_only)
    def search(
        query: Annotated[str, Field(description="the question in plain words, any language")] = "",
        domain: Annotated[str | list[str] | None, Field(description=f"only these domains ({domains})")] = None,
        type: Annotated[str | list[str] | None, Field(description="only notes of these types (any of them)")] = None,
        tag: Annotated[str | list[str] | None, Field(description="notes carrying every one of these tags")] = None,
        status: Annotated[str | list[str] | None, Field(description='only these statuses, e.g. "stable"')] = None,
        where: Annotated[
            str | list[str] | dict[str, Any] | None,
            Field(description='frontmatter filter: "key=value" expressions or a JSON filter object'),
        ] = None,
        as_of: Annotated[str | None, Field(description="YYYY-MM-DD: only notes valid on that date")] = None,
        after: Annotated[str | None, Field(description="YYYY-MM-DD: only notes recorded on or after it")] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="how many hits")] = 10,
        mode: Annotated[
            Literal["hybrid", "text", "semantic"], Field(description="hybrid unless told otherwise")
        ] = "hybrid",
    ) -> SearchOut:
        res = guarded(
            recall.search,
            query,
            domain=domain,
            type=type,
            tag=tag,
            status=status,
            where=where,
            as_of=as_of,
            after=after,
            limit=limit,
            mode=mode,
        )
        return SearchOut.model_validate(res)

    @server.tool(name="build_context", description=CONTEXT_DOC, annotations=read_only)
    def build_context(
        address: Annotated[str, Field(description="geode://domain/permalink, or geode://domain/folder/*")],
        depth: Annotated[int, Field(ge=1, le=3, description="hops to follow, 1 to 3")] = 2,
        max_related: Annotated[int, Field(ge=1, le=100, description="how many neighbours to return")] = 10,
    ) -> ContextOut:
        return ContextOut.model_validate(guarded(recall.build_context, address, depth, max_related))

    @server.tool(name="read_note", description=READ_DOC, annotations=read_only)
    def read_note(
        address: Annotated[str, Field(description="geode://domain/permalink (from a search hit)")],
    ) -> NoteOut:
        return NoteOut.model_validate(guarded(recall.read_note, address))

    @server.tool(name="recent_activity", description=RECENT_DOC, annotations=read_only)
    def recent_activity(
        period: Annotated[str, Field(description="day, week, fortnight, month, Nh, Nd, Nw or YYYY-MM-DD")] = "week",
        domain: Annotated[str | list[str] | None, Field(description=f"only these domains ({domains})")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> RecentOut:
        return RecentOut.model_validate(guarded(recall.recent_activity, period, domain, limit))

    @server.tool(
        name="write_note",
        description=WRITE_DOC,
        annotations=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    def write_note(
        title: Annotated[str, Field(description="one line; also gives the file name")],
        body: Annotated[
            str, Field(description="the note in markdown (end with '## Where this came from' when it binds a crystal)")
        ],
        folder: Annotated[
            str, Field(description="folder relative to the domain's root, e.g. ops/ci ('' for the top)")
        ] = "",
        domain: Annotated[
            str | None, Field(description=f"one of {domains} (default {settings.default_domain})")
        ] = None,
        frontmatter: Annotated[
            dict[str, Any] | None, Field(description="more frontmatter: description, type, tags, status, salience, ...")
        ] = None,
        crystal: Annotated[Crystal | None, Field(description="bind the note to actions (needs essence)")] = None,
        essence: Annotated[str | None, Field(description="the text delivered when the binding fires")] = None,
    ) -> WriteOut:
        res = guarded(
            recall.write_note,
            title,
            body,
            folder=folder,
            domain=domain,
            frontmatter=frontmatter,
            crystal=crystal.model_dump(exclude_none=True) if crystal is not None else None,
            essence=essence,
        )
        return WriteOut.model_validate(res)

    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geode")
    except PackageNotFoundError:  # a checkout on sys.path, not installed
        return "0"


# -- HTTP on loopback ---------------------------------------------------------------------------
LOOPBACK = ("127.0.0.1", "::1", "localhost")
TOKEN_ENV = "GEODE_MCP_TOKEN"


def token_path(settings) -> str:
    return os.path.join(settings.home, "mcp-token")


def load_token(settings) -> str:
    """``GEODE_MCP_TOKEN``, else ``GEODE_HOME/mcp-token`` (created 0600 with a random token)."""
    import secrets

    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    path = token_path(settings)
    try:
        with open(path, encoding="utf-8") as fh:
            tok = fh.read().strip()
        if tok:
            return tok
    except FileNotFoundError:
        pass
    os.makedirs(settings.home, exist_ok=True)
    tok = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(tok + "\n")
    return tok


def allowed_hosts(port: int) -> list[str]:
    """The Host header values the SDK's own DNS-rebinding check accepts (a second line behind
    :class:`Guard`, which applies the page's rule)."""
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]


class Guard(PageGuard):
    """The page's guard (``geode.web.security.Guard``), for an MCP client instead of a browser.

    The same rules as every local server of this project, by the same code: the ``Host`` must
    be the bound address or ``localhost`` (with the bound port, or none), else 403 before
    anything else (DNS rebinding); every request carries the token, compared in constant time,
    else 401. What differs, because the client is an agent and not a browser: the token comes
    only as ``Authorization: Bearer`` (no cookie, no ``?token=``, so no CSRF token either); the
    methods are the streamable-HTTP transport's (POST a message, GET the event stream, DELETE
    the session); any request that says it comes from another origin (``Origin``,
    ``Sec-Fetch-Site: cross-site``) is refused, whatever its method. The token outlives a
    restart (``GEODE_HOME/mcp-token`` or ``$GEODE_MCP_TOKEN``), unlike the page's: an agent's
    configuration holds it.
    """

    METHODS = ("GET", "POST", "DELETE")

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        if scope["type"] != "http":
            return await self._deny(send, 403, "only HTTP")
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if not self.host_ok(headers.get("host")):
            return await self._deny(send, 403, "this server answers only to its own address (Host refused)")
        origin = headers.get("origin")
        if origin is not None and not self.origin_ok(origin):
            return await self._deny(send, 403, "cross-origin request refused")
        if headers.get("sec-fetch-site", "none") not in ("none", "same-origin"):
            return await self._deny(send, 403, "cross-site request refused")
        auth = headers.get("authorization", "")
        if not self._token_ok(auth[7:].strip() if auth[:7].lower() == "bearer " else None):
            return await self._deny(
                send,
                401,
                f"a token is needed: send Authorization: Bearer TOKEN (${TOKEN_ENV}, or the file GEODE_HOME/mcp-token)",
            )
        if scope["method"].upper() not in self.METHODS:
            return await self._deny(send, 405, f"{scope['method']} is not used by the MCP transport")
        return await self.app(scope, receive, send)


def http_app(settings, server, port: int, token: str, host: str = "127.0.0.1"):
    """The streamable-HTTP app at ``/mcp`` behind :class:`Guard` (and the SDK's own Host check)."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = allowed_hosts(port)
    sec = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[f"http://{h}" for h in hosts]
    )
    app = server.streamable_http_app(streamable_http_path="/mcp", transport_security=sec, host=host)
    return Guard(app, token, host, port)


def run_http(settings, server, port: int, host: str = "127.0.0.1", ready=None) -> None:
    import uvicorn

    if host not in LOOPBACK:
        raise ToolInputError(f"--host {host}: geode mcp listens on loopback only ({', '.join(LOOPBACK)})")
    token = load_token(settings)
    bind = "::1" if host == "::1" else "127.0.0.1"
    app = http_app(settings, server, port, token, bind)
    config = uvicorn.Config(app, host=bind, port=port, log_level="warning", lifespan="on")
    if ready is not None:
        ready()
    uvicorn.Server(config).run()


__all__ = ["Recall", "build_server", "instructions", "domain_lines", "run_http", "ToolInputError"]
