"""The note: one markdown file, parsed into what every room needs, with line numbers.

Built on ``crystal.py`` (the lean part the hook uses); this module adds links, relations,
observations and headings for the CLI, recall and the maintenance agents. They come from the
one markdown reader (``geode.kernel.mdread``, a CommonMark parser), read on first use and
kept on the note, so a run parses each note once and the hook (which never asks) not at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from geode.kernel.crystal import (  # noqa: F401  (re-exported)
    ESSENCE_CLOSE,
    ESSENCE_OPEN,
    NOTE_SUFFIXES,
    RETIRED_STATUSES,
    CrystalText,
    NoteError,
    extract_essence,
    parse_crystal_text,
)

if TYPE_CHECKING:
    from geode.kernel.mdread import Reading

_TAG_RE = re.compile(r"(?:^|\s)#([\w/-]+)")


@dataclass(frozen=True, slots=True)
class Link:
    """A link out of the note. ``kind``: ``relation``, ``wiki``, ``markdown`` or ``reference``."""

    target: str
    line: int
    kind: str
    relation: str = "links_to"
    alias: str = ""
    anchor: str = ""


@dataclass(frozen=True, slots=True)
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
    _reading: Reading | None = field(default=None, repr=False, compare=False)
    _scanned: tuple[list[Link], list[Observation], list[tuple[int, int, str]]] | None = field(
        default=None, repr=False, compare=False
    )

    # -- the body, read once by the markdown reader (on first use: the hook never asks) ------
    @property
    def reading(self) -> Reading:
        """The body as the one markdown reader sees it (``geode.kernel.mdread``), cached."""
        if self._reading is None:
            from geode.kernel.mdread import read_markdown

            self._reading = read_markdown(self.body, self.body_line)
        return self._reading

    def _scan(self) -> tuple[list[Link], list[Observation], list[tuple[int, int, str]]]:
        if self._scanned is None:
            r = self.reading
            self._scanned = scan_reading(r)
            # what the scan turned into Links and Observations is not kept twice (memory at
            # 100,000 notes): the reading keeps only what nothing else holds
            r.links = [lk for lk in r.links if lk.kind == "refuse"]
            r.items = []
        return self._scanned

    @property
    def links(self) -> list[Link]:
        """Links out of the note (external URLs left out), in the order written."""
        return self._scan()[0]

    @property
    def observations(self) -> list[Observation]:
        return self._scan()[1]

    @property
    def headings(self) -> list[tuple[int, int, str]]:
        """``(line, level, text)`` of every heading: ATX, setext, in quotes and lists."""
        return self._scan()[2]

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


def scan_reading(r: Reading) -> tuple[list[Link], list[Observation], list[tuple[int, int, str]]]:
    """Links, observations and headings from the reader's tokens (never from the raw text: code
    blocks, HTML comments and footnotes are the parser's to tell apart)."""
    links: list[Link] = []
    for lk in sorted(r.links, key=lambda x: x.line):
        if lk.external:
            continue
        if lk.kind in ("wiki", "embed", "relation"):
            links.append(
                Link(
                    lk.target, lk.line, "relation" if lk.kind == "relation" else "wiki", lk.relation, lk.text, lk.anchor
                )
            )
        elif lk.kind in ("markdown", "image"):
            links.append(
                Link(lk.raw and _raw_path(lk.raw) or lk.target, lk.line, "markdown", lk.relation, lk.text, lk.anchor)
            )
        elif lk.kind == "reference":
            links.append(Link(_raw_path(lk.raw) or lk.target, lk.line, "reference", "links_to", lk.text, lk.anchor))
    observations: list[Observation] = []
    for item in r.items:
        if item.line in r.relation_lines:
            continue
        text = item.text.strip()
        if not text or text in (ESSENCE_OPEN, ESSENCE_CLOSE):
            continue
        category = ""
        if text.startswith("[") and "] " in text:
            category, text = text[1:].split("] ", 1)
            category, text = category.strip(), text.strip()
        observations.append(Observation(item.line, text, category, tuple(_TAG_RE.findall(text))))
    headings = [(h.line, h.level, h.text) for h in r.headings]
    return links, observations, headings


def _raw_path(raw: str) -> str:
    """A destination as written, without its ``#anchor`` (kept percent-encoded as written: the
    resolver decodes, the rewriter matches the bytes on the line)."""
    return raw.split("#", 1)[0]


def _cursor_rule(text: str, path: str) -> CrystalText:
    """A Cursor rule whose header strict and lenient YAML both reject, read as Cursor reads it
    (``geode.kernel.header_format.cursor_fields``), the body after it as any note's."""
    from geode.kernel.header_format import cursor_fields

    data, lines, spans = cursor_fields(text) or ({}, {}, 0)
    parts = text.split("\n", spans)
    body = parts[spans] if len(parts) > spans else ""
    essence, essence_line, _problems = extract_essence(body, spans + 1)
    out = CrystalText(path, data, lines, [], essence, essence_line, body, spans + 1, text)
    out.has_frontmatter = True
    return out


def parse_note(text: str, path: str) -> Note:
    """Parse one note. Raises ``NoteError`` (with file and line) when it cannot be read."""
    try:
        c = parse_crystal_text(text, path)
    except NoteError as exc:
        if exc.code != "bad-frontmatter" or not path.lower().endswith(".mdc"):
            raise
        c = _cursor_rule(text, path)  # Cursor reads its header line by line, never as YAML
    frontmatter, fm_lines, has_fm, body, body_line = c.frontmatter, c.fm_lines, c.has_frontmatter, c.body, c.body_line
    if not has_fm and (text.lstrip("\ufeff")[:3] == "+++" or "::" in text[:4096]):
        # a header in its tool's own format (Hugo's TOML, Logseq's properties): read, so a
        # title, aliases and tags come through (``geode.kernel.header_format``)
        from geode.kernel.header_format import tool_frontmatter

        found = tool_frontmatter(path, text)
        if found is not None:
            frontmatter, fm_lines, spans = found
            has_fm = True
            if spans:
                parts = text.split("\n", spans)
                body, body_line = (parts[spans] if len(parts) > spans else ""), spans + 1
    essence_problems = extract_essence(body, body_line)[2]
    return Note(
        path=path,
        text=text,
        frontmatter=frontmatter,
        fm_lines=fm_lines,
        fm_warnings=c.fm_warnings,
        has_frontmatter=has_fm,
        body=body,
        body_line=body_line,
        essence=c.essence,
        essence_line=c.essence_line,
        essence_problems=essence_problems,
    )
