"""The shapes recall hands to other rooms: a search, a note's neighbourhood, a note read back,
the recent changes.

Why TypedDicts and not dataclasses: the CLI, the MCP server, the page and the warm search server
print or send these as JSON as they are; a TypedDict is the same dict at run time (the output stays
byte for byte what it was) while mypy checks every key a producer writes and a consumer reads.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class SearchHit(TypedDict):
    """One note ``search`` found. ``lexical``/``semantic``/``cosine``: None where that side did not
    find it; ``supersedes``/``superseded_by`` (addresses): only when the search follows chains."""

    address: str
    domain: str
    path: str
    title: str
    score: float
    snippet: str
    line: int | None
    status: str | None
    type: str | None
    lexical: float | None
    semantic: float | None
    cosine: float | None
    supersedes: NotRequired[list[str]]
    superseded_by: NotRequired[list[str]]


class SearchResult(TypedDict):
    """What ``search`` returns: the hits, the mode that answered (hybrid, text, semantic), notes in
    scope still waiting for a vector, why the semantic side did not answer ("" when it did), the
    number of matching notes before ``limit``, and the query as searched."""

    results: list[SearchHit]
    mode: str
    pending: int
    notice: str
    total: int
    query: str


class RelatedNote(TypedDict):
    """One neighbour in ``build_context``: how it is reached (its best path) and its score."""

    address: str
    domain: str
    path: str
    title: str
    relation: str
    direction: str
    via: str
    hops: int
    paths: int
    score: float
    status: str | None


class ContextResult(TypedDict):
    """What ``build_context`` returns: the anchors, the neighbours ranked, and how they were scored."""

    anchor: str
    anchors: list[str]
    depth: int
    related: list[RelatedNote]
    total: int
    capped: bool
    score: str


class NoteLink(TypedDict):
    """A link or relation of a note read back, resolved to an address or not."""

    relation: str
    kind: str
    target: str
    line: int | None
    resolved: bool
    address: str | None
    title: str | None


class Observation(TypedDict):
    line: int
    category: str
    text: str


class Backlink(TypedDict):
    address: str
    title: str
    relation: str
    line: int


#: who links to a note: how many links, by relation, and the first 20 (one per note and relation);
#: the functional form because one key, ``from``, is a keyword
Backlinks = TypedDict("Backlinks", {"count": int, "by_relation": dict[str, int], "from": list[Backlink]})


class NextStep(TypedDict):
    build_context: str
    command: str


class NoteRead(TypedDict):
    """What ``read_note`` returns: the note from its file, its links resolved, who links to it, and
    the ``build_context`` call to make next (None when it has no neighbours)."""

    address: str
    domain: str
    path: str
    title: str
    status: str | None
    type: str | None
    frontmatter: dict[str, Any]
    content: str
    observations: list[Observation]
    links: list[NoteLink]
    unresolved: int
    backlinks: Backlinks
    next: NextStep | None


class RecentNote(TypedDict):
    address: str
    domain: str
    path: str
    title: str
    date: str
    status: str | None
    type: str | None
    recorded: str


class RecentActivity(TypedDict):
    """What ``recent_activity`` returns: the notes changed in the period, newest first."""

    period: str
    since: str
    results: list[RecentNote]
    total: int
    by_domain: dict[str, int]


#: Results under this score are weak: a note that shares one incidental word with the question,
#: noise at the bottom of the list. The command line, the page and the MCP ``search`` tool hide
#: them alike (each says how many it hid); ``--json`` and ``?all=1`` keep them. One number, so
#: that the three surfaces never disagree on what a search found.
SHOWN_FLOOR = 0.1


def split_weak(results: list, query: str | None) -> tuple[list, int]:
    """``(the results at or above SHOWN_FLOOR, how many under it)``; a listing by filters alone
    (no query) has no relevance to cut at and keeps them all."""
    if not query:
        return list(results), 0
    shown = [h for h in results if h["score"] >= SHOWN_FLOOR]
    return shown, len(results) - len(shown)
