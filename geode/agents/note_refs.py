"""What a note's own text says about links: the ``Ref`` type (one reference out of a note), the
references its prose makes outside any link syntax (bare paths, undefined reference-style
labels), and the anchors it offers (heading slugs, ``{#id}``, ``<a id>``, ``^block`` ids).

Apart from ``geode.agents.links`` (which resolves references against a whole store) because all
of this reads one note and nothing else: no store, no file system.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from geode.delivery.crystal import NOTE_SUFFIXES
from geode.delivery.note import Note, prose_lines

_URL_RE = re.compile(r"(?:[a-zA-Z][a-zA-Z0-9+.-]*://|www\.)[^\s)>\]]*")
_MDLINK_SPAN_RE = re.compile(r"!?\[[^\]\n]*\]\([^)\n]*\)")
_WIKI_SPAN_RE = re.compile(r"!?\[\[[^\]\n]+\]\]")
_REFDEF_LINE_RE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_ANGLE_RE = re.compile(r"<[^>\n]*>")
_REFUSE_RE = re.compile(r"(?<![\]\\!])\[([^\[\]\n]+)\]\[([^\[\]\n]*)\](?!\()")
_REFDEF_RE = re.compile(r"^\s{0,3}\[([^\]]+)\]:")
_CODE_SPAN_RE = re.compile(r"`([^`\n]*)`")
_PATH_RE = re.compile(r"(?<![\w/.:~$%-])@?((?:\.{1,2}/)*[\w][\w.+-]*(?:/[\w.+-]+)*\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/])")
_HEADING_ID_RE = re.compile(r"\s*\{#([^}\s]+)[^}]*\}\s*$")
_HTML_ID_RE = re.compile(r"<a\s[^>]*(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
_BLOCK_ID_RE = re.compile(r"\s\^([A-Za-z0-9-]+)\s*$", re.M)


@dataclass(frozen=True)
class Ref:
    """One reference out of a note. ``syntax``: relation | wiki | markdown | reference | path |
    refuse (a reference-style use ``[text][label]``)."""

    line: int
    syntax: str
    target: str
    anchor: str = ""
    alias: str = ""
    relation: str = "links_to"
    raw: str = ""  # the target text as written (for rewrites)


def slug(text: str) -> str:
    """GitHub's and mdBook's heading id: lower case, punctuation dropped, spaces to hyphens."""
    t = unicodedata.normalize("NFC", text.strip().lower())
    t = re.sub(r"[`*_~]{1,3}(?=\S)|(?<=\S)[`*_~]{1,3}", lambda m: "_" if m.group(0) == "_" else "", t)
    t = re.sub(r"[^\w\- ]", "", t)
    return t.replace(" ", "-")


def prose_refs(note: Note) -> list[Ref]:
    """Bare paths and undefined reference-style labels, outside fenced code."""
    out: list[Ref] = []
    defined = set()
    lines = note.body.split("\n")
    for raw in lines:
        m = _REFDEF_RE.match(raw)
        if m:
            defined.add(m.group(1).strip().casefold())
    for lineno, line in prose_lines(note.body, note.body_line):
        if _REFDEF_LINE_RE.match(line):
            continue
        text = _URL_RE.sub(" ", line)
        text = _MDLINK_SPAN_RE.sub(" ", text)
        text = _WIKI_SPAN_RE.sub(" ", text)
        text = _ANGLE_RE.sub(" ", text)
        prose = _CODE_SPAN_RE.sub(" ", text)
        for rm in _REFUSE_RE.finditer(prose):
            label = (rm.group(2) or rm.group(1)).strip()
            if label.casefold() not in defined and label not in (" ", "x", "X"):
                out.append(Ref(lineno, "refuse", label, raw=label))
        scan = _CODE_SPAN_RE.sub(lambda mm: " " + mm.group(1) + " ", text)
        for pm in _PATH_RE.finditer(scan):
            tok = pm.group(1).rstrip(".")
            if "/" not in tok and not tok.lower().endswith(NOTE_SUFFIXES):
                continue
            anchor = ""
            out.append(Ref(lineno, "path", tok, anchor, raw=tok))
    return out


def note_anchors(note: Note) -> set[str]:
    """Every anchor a link may name in ``note``, case-folded: heading slugs (GitHub/mdBook, with
    ``-1``, ``-2`` for repeats) and heading texts (Obsidian), ``{#id}`` attributes, ``<a id|name>``
    tags and ``^block`` ids."""
    out: set[str] = set()
    counts: dict[str, int] = {}
    for _line, _lvl, text in note.headings:
        m = _HEADING_ID_RE.search(text)
        if m:
            out.add(m.group(1).casefold())
            text = text[: m.start()]
        s = slug(text)
        n = counts.get(s, 0)
        counts[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
        out.add(text.strip().casefold())
    out.update(a.casefold() for a in _HTML_ID_RE.findall(note.text))
    out.update("^" + b.casefold() for b in _BLOCK_ID_RE.findall(note.text))
    return out
