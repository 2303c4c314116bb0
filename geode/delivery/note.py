"""The note: one markdown file, parsed into what every room needs, with line numbers.

Built on ``crystal.py`` (the lean part the hook uses); this module adds links, relations,
observations and headings for the CLI, recall and the maintenance agents.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from geode.delivery.crystal import (  # noqa: F401  (re-exported)
    ESSENCE_CLOSE,
    ESSENCE_OPEN,
    NOTE_SUFFIXES,
    RETIRED_STATUSES,
    NoteError,
    extract_essence,
    parse_crystal_text,
)

_RELATION_RE = re.compile(r"^\s*[-*+]\s+([A-Za-z_][\w-]*)\s+\[\[([^\]\n]+)\]\]")
_WIKI_RE = re.compile(r"(!?)\[\[([^\]\n]+)\]\]")
_MDLINK_RE = re.compile(r"(!?)\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFDEF_RE = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_OBS_RE = re.compile(r"^\s*[-*+]\s+(?:\[([^\]]+)\]\s+)?(.+)$")
_TAG_RE = re.compile(r"(?:^|\s)#([\w/-]+)")
_CODE_SPAN_RE = re.compile(r"`[^`\n]*`")
_FENCE_RE = re.compile(r"^\s{0,3}(```|~~~)")


@dataclass(frozen=True)
class Link:
    """A link out of the note. ``kind``: ``relation``, ``wiki``, ``markdown`` or ``reference``."""

    target: str
    line: int
    kind: str
    relation: str = "links_to"
    alias: str = ""
    anchor: str = ""


@dataclass(frozen=True)
class Observation:
    line: int
    text: str
    category: str = ""
    tags: tuple[str, ...] = ()


@dataclass
class Note:
    path: str  # relative to the store root, POSIX separators
    text: str
    frontmatter: dict
    fm_lines: dict[str, int]
    fm_warnings: list[tuple[int, str, str]]
    has_frontmatter: bool
    body: str
    body_line: int  # file line of the first body line
    essence: str | None
    essence_line: int  # line of the opening marker (0 when absent)
    essence_problems: list[tuple[int, str, str]] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    headings: list[tuple[int, int, str]] = field(default_factory=list)  # (line, level, text)

    # -- identity ---------------------------------------------------------
    @property
    def name(self) -> str:
        n = self.frontmatter.get("name")
        return str(n) if n not in (None, "") else self.stem

    @property
    def stem(self) -> str:
        base = self.path.rsplit("/", 1)[-1]
        for suf in NOTE_SUFFIXES:
            if base.endswith(suf):
                return base[: -len(suf)]
        return base

    @property
    def permalink(self) -> str:
        """Defaults to the path inside the store, without the suffix."""
        p = self.frontmatter.get("permalink")
        if p:
            return str(p).strip("/")
        for suf in NOTE_SUFFIXES:
            if self.path.endswith(suf):
                return self.path[: -len(suf)]
        return self.path

    @property
    def title(self) -> str:
        t = self.frontmatter.get("title")
        if t:
            return str(t)
        for _line, level, text in self.headings:
            if level == 1:
                return text
        return self.name

    @property
    def aliases(self) -> list[str]:
        a = self.frontmatter.get("aliases") or []
        return [str(x) for x in (a if isinstance(a, list) else [a])]

    @property
    def status(self) -> str:
        return str(self.frontmatter.get("status") or "").lower()

    @property
    def crystal(self) -> dict | None:
        c = self.frontmatter.get("crystal")
        return c if isinstance(c, dict) else None

    @property
    def relations(self) -> list[Link]:
        return [lk for lk in self.links if lk.kind == "relation"]

    def line_of(self, key: str) -> int:
        return self.fm_lines.get(key, 1)


def _split_target(raw: str) -> tuple[str, str, str]:
    """``Target#anchor|alias`` -> (target, alias, anchor)."""
    alias = ""
    if "|" in raw:
        raw, alias = raw.split("|", 1)
    anchor = ""
    if "#" in raw:
        raw, anchor = raw.split("#", 1)
    return raw.strip(), alias.strip(), anchor.strip()


def _is_external(target: str) -> bool:
    t = target.lower()
    return t.startswith(("http://", "https://", "mailto:", "ftp://", "tel:", "data:")) or "://" in t


def prose_lines(body: str, body_line: int):
    """``(file line, line)`` for every non-blank body line outside fenced code blocks: the one
    place that decides what counts as prose (the Librarian's scan of bare paths uses it too)."""
    in_fence = False
    fence = ""
    for offset, raw in enumerate(body.split("\n")):
        line = raw.rstrip("\r")
        m = _FENCE_RE.match(line)
        if m:
            if not in_fence:
                in_fence, fence = True, m.group(1)
            elif m.group(1) == fence:
                in_fence = False
            continue
        if in_fence or not line.strip():
            continue
        yield body_line + offset, line


def scan_body(body: str, body_line: int) -> tuple[list[Link], list[Observation], list[tuple[int, int, str]]]:
    """Links, observations and headings of the body, skipping fenced code and code spans."""
    links: list[Link] = []
    observations: list[Observation] = []
    headings: list[tuple[int, int, str]] = []
    for lineno, line in prose_lines(body, body_line):
        stripped = line.strip()
        if stripped in (ESSENCE_OPEN, ESSENCE_CLOSE) or not stripped:
            continue
        h = _HEADING_RE.match(line)
        if h:
            headings.append((lineno, len(h.group(1)), h.group(2).strip()))
            continue
        scan = _CODE_SPAN_RE.sub(lambda mm: " " * len(mm.group(0)), line)
        rel = _RELATION_RE.match(scan)
        rel_span = None
        if rel:
            target, alias, anchor = _split_target(rel.group(2))
            links.append(Link(target, lineno, "relation", rel.group(1), alias, anchor))
            rel_span = rel.span(2)
        for wm in _WIKI_RE.finditer(scan):
            if rel_span and wm.start(2) == rel_span[0]:
                continue
            target, alias, anchor = _split_target(wm.group(2))
            if target or anchor:
                links.append(Link(target, lineno, "wiki", "embeds" if wm.group(1) else "links_to", alias, anchor))
        for mm in _MDLINK_RE.finditer(scan):
            target = mm.group(3)
            if _is_external(target):
                continue
            anchor = ""
            if "#" in target:
                target, anchor = target.split("#", 1)
            links.append(Link(target, lineno, "markdown", "embeds" if mm.group(1) else "links_to", mm.group(2), anchor))
        rd = _REFDEF_RE.match(scan)
        if rd and not _is_external(rd.group(2)):
            target = rd.group(2)
            anchor = ""
            if "#" in target:
                target, anchor = target.split("#", 1)
            links.append(Link(target, lineno, "reference", "links_to", rd.group(1), anchor))
        om = _OBS_RE.match(line)
        if om and not rel:
            text = om.group(2).strip()
            tags = tuple(t for t in _TAG_RE.findall(text))
            observations.append(Observation(lineno, text, (om.group(1) or "").strip(), tags))
    return links, observations, headings


def parse_note(text: str, path: str) -> Note:
    """Parse one note. Raises ``NoteError`` (with file and line) when it cannot be read."""
    c = parse_crystal_text(text, path)
    essence_problems = extract_essence(c.body, c.body_line)[2]
    links, observations, headings = scan_body(c.body, c.body_line)
    return Note(
        path=path,
        text=text,
        frontmatter=c.frontmatter,
        fm_lines=c.fm_lines,
        fm_warnings=c.fm_warnings,
        has_frontmatter=c.has_frontmatter,
        body=c.body,
        body_line=c.body_line,
        essence=c.essence,
        essence_line=c.essence_line,
        essence_problems=essence_problems,
        links=links,
        observations=observations,
        headings=headings,
    )
