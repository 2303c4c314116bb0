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

Where each part lives: this module builds the ``MCPServer`` (the tools as MCP, the tool boundary);
:mod:`geode.mcp.tools` holds the tools as plain methods (and the closest addresses),
:mod:`geode.mcp.write_note` the one tool that writes, :mod:`geode.mcp.models` the structured
outputs, :mod:`geode.mcp.inputs` the checked inputs and :class:`ToolInputError`,
:mod:`geode.mcp.routing` the routing text, :mod:`geode.mcp.loopback` the HTTP transport.

No ``from __future__ import annotations`` here: the SDK reads the tools' annotations at run time,
and they name values local to ``build_server`` (the configured domains).

Warm-up: the model, Chroma and the index load in a background thread as soon as the server
serves, while the client runs its handshake; the first tool call waits for it
(``bench/mcp_speed.py`` measures start-up and call latency).
"""

import logging
import traceback
from typing import Annotated, Any, Literal

from pydantic import Field

from geode.kernel.config import ConfigError
from geode.kernel.errors import GeodeError
from geode.mcp.inputs import clip
from geode.mcp.models import ContextOut, Crystal, NoteOut, RecentOut, SearchOut, WriteOut
from geode.mcp.routing import CONTEXT_DOC, READ_DOC, RECENT_DOC, SEARCH_DOC, WRITE_DOC, instructions
from geode.mcp.tools import Recall

log = logging.getLogger("geode.mcp")

SERVER_NAME = "geode"
#: the most characters of an error message the log and the agent get (``inputs.clip``)
MAX_ERROR_CHARS = 2000


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
            raise ToolError(f"configuration: {clip(str(exc), MAX_ERROR_CHARS)}") from None
        except GeodeError as exc:  # said for a person (bad input, not found, a part unavailable): said as is
            raise ToolError(clip(str(exc), MAX_ERROR_CHARS)) from None
        except Exception as exc:  # tool boundary: a bug becomes a tool error, logged; the server keeps answering
            # the message of a database error holds the statement and its parameters, so the
            # arguments: the log and the reply get its start and its length, never all of it
            said = clip(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS)
            log.error("%s failed: %s\n%s", fn.__name__, said, "".join(traceback.format_tb(exc.__traceback__)))
            raise ToolError(
                f"{fn.__name__} failed: {said}. The server keeps running; "
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


__all__ = ["build_server", "SERVER_NAME"]
