"""The MCP tools' pydantic models: the structured outputs the SDK sends as ``structuredContent``
and as JSON text (and publishes as each tool's output schema), and ``write_note``'s ``Crystal``.

Apart because they are the tools' contract with the client (field descriptions included), read
by the SDK at run time; the tools that fill them live in ``geode.mcp.tools`` and
``geode.mcp.write_note``. No ``from __future__ import annotations``: pydantic reads the
annotations at run time.
"""

from typing import Any, Literal

from pydantic import BaseModel, Field

#: ``read_note`` returns at most this many characters of a note's file (a note is short; a
#: megabyte-long file would flood the agent's context). ``truncated`` says when it was cut.
MAX_CONTENT_CHARS = 60_000


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
