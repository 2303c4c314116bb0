"""Whose header a note carries, what that tool reads from it, and whether an edit keeps it.

Not every ``key: value`` block at the top of a note is YAML. Three tools write their own:

- **Cursor rules** (``.mdc``): the ``---`` fenced lines ``description:``, ``globs:`` and
  ``alwaysApply:`` are read line by line, raw. ``globs: **/*.rs`` is the glob ``**/*.rs``;
  quoted, Cursor keeps the quotes and the rule stops attaching. Strict YAML rejecting such a
  line is YAML's opinion, not a defect of the file.
- **Hugo's TOML front matter**: ``+++`` fenced, read by Hugo as TOML (``tomllib`` reads it here).
- **Logseq page properties**: ``key:: value`` lines of the first block (``title::``,
  ``alias::``, ``tags::``), and block properties further down.

What geode promises (issue 21): a change is made to such a note only where the header reads, to
its tool, as it read before: the Cursor header lines byte for byte, the TOML table as the same
dict, the Logseq properties line for line, and no YAML block put in front of any of them.
``tool_header_change`` says why a change breaks that ("" when it does not); the filing gate
(``geode.agents.filing``) refuses a draft for which it says anything, whichever agent made it.

Also the reading the other rooms need so a title, aliases and tags come through
(``tool_frontmatter``): the TOML table, or the Logseq page properties with ``alias::`` as
``aliases`` and ``tags::`` as a list. Standard library only (the kernel's rule).
"""

from __future__ import annotations

import re

#: the header kinds, by the tool that reads them
CURSOR = "cursor-mdc"
TOML = "hugo-toml"
LOGSEQ = "logseq-properties"
YAML = "yaml"
NONE = "none"

#: what a person is told each kind is
KIND_WORDS = {
    CURSOR: "a Cursor rule header (read by Cursor line by line, not as YAML)",
    TOML: "Hugo TOML front matter (+++)",
    LOGSEQ: "Logseq page properties (key:: value)",
}

_PROP = re.compile(r"^(\s*(?:-\s+)?)([A-Za-z0-9_][\w.-]*)::(?:\s(.*)|)$")


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _fenced(text: str, fence: str) -> tuple[int, int] | None:
    """(first, closing) 0-based line indexes of a header fenced by ``fence`` at the top."""
    body = text.lstrip("\ufeff")
    if not body.startswith(fence):  # most notes: nothing to split
        return None
    lines = _lines(body)
    if lines[0].rstrip("\r").rstrip() != fence:
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip("\r").rstrip() == fence:
            return 0, i
    return None


def header_kind(path: str, text: str) -> str:
    """Which tool reads this note's header: ``CURSOR``, ``TOML``, ``LOGSEQ``, ``YAML`` or ``NONE``."""
    if _fenced(text, "+++") is not None:
        return TOML
    if _fenced(text, "---") is not None:
        return CURSOR if path.lower().endswith(".mdc") else YAML
    if page_property_lines(text):
        return LOGSEQ
    return NONE


def is_tool_header(path: str, text: str) -> bool:
    """Whether the header is one a tool reads in its own format (never to be edited as YAML)."""
    return header_kind(path, text) in (CURSOR, TOML, LOGSEQ)


def header_text(text: str, fence: str) -> str:
    """The raw fenced header, fences included ("" when there is none)."""
    span = _fenced(text, fence)
    if span is None:
        return ""
    body = text.lstrip("\ufeff")
    return "\n".join(_lines(body)[: span[1] + 1])


def page_property_lines(text: str) -> list[str]:
    """The Logseq page properties: the ``key:: value`` lines the file opens with (its first
    block), raw."""
    out: list[str] = []
    head = text.lstrip("\ufeff")
    if "::" not in head.split("\n", 1)[0]:  # a page's properties start on its first line
        return out
    for i, line in enumerate(head.split("\n", 400)[:400]):
        m = _PROP.match(line.rstrip("\r"))
        if m is None or (i and m.group(1).strip().startswith("-")):
            break
        out.append(line)
    return out


def property_lines(text: str) -> list[str]:
    """Every Logseq property line of the file (page and block properties), raw, in order."""
    return [ln for ln in _lines(text) if _PROP.match(ln.rstrip("\r"))]


def toml_table(text: str) -> dict | None:
    """Hugo's TOML front matter as the dict Hugo reads (None: none, or not TOML)."""
    import tomllib

    span = _fenced(text, "+++")
    if span is None:
        return None
    inner = "\n".join(ln.rstrip("\r") for ln in _lines(text.lstrip("\ufeff"))[1 : span[1]])
    try:
        return tomllib.loads(inner)
    except tomllib.TOMLDecodeError:
        return None


def _split_list(value: str) -> list[str]:
    out = []
    for part in value.split(","):
        p = part.strip()
        if p.startswith("[[") and p.endswith("]]"):
            p = p[2:-2].strip()
        if p.startswith("#"):
            p = p[1:]
        if p:
            out.append(p)
    return out


def tool_frontmatter(path: str, text: str) -> tuple[dict, dict[str, int], int] | None:
    """What a non-YAML header says, as frontmatter: ``(data, key -> line, lines it spans)``;
    None when the note has no such header. TOML: the table (``aliases`` as Hugo names them);
    Logseq: the page properties, ``alias::`` also as ``aliases`` and ``tags::`` as a list. The
    Logseq lines stay part of the body (they are the first block to Logseq)."""
    kind = header_kind(path, text)
    if kind == TOML:
        data = toml_table(text)
        span = _fenced(text, "+++")
        if data is None or span is None:
            return None
        lines_of: dict[str, int] = {}
        for i, ln in enumerate(_lines(text.lstrip("\ufeff"))[1 : span[1]], start=2):
            key = ln.split("=", 1)[0].strip().strip("\"'")
            if key in data and key not in lines_of:
                lines_of[key] = i
        return data, lines_of, span[1] + 1
    if kind == LOGSEQ:
        data = {}
        lines_of = {}
        for i, ln in enumerate(page_property_lines(text), start=1):
            m = _PROP.match(ln.rstrip("\r"))
            if m is None:
                continue
            key, value = m.group(2).lower(), (m.group(3) or "").strip()
            data[key] = value
            lines_of[key] = i
        if "alias" in data:
            data["aliases"] = _split_list(str(data["alias"]))
        if "tags" in data:
            data["tags"] = _split_list(str(data["tags"]))
        return data, lines_of, 0
    return None


def cursor_fields(text: str) -> tuple[dict, dict[str, int], int] | None:
    """A Cursor rule's header as Cursor reads it, line by line: ``key: raw value`` (quotes and
    all, ``alwaysApply`` as a bool), with ``(data, key -> line, lines it spans)``; None when
    there is no ``---`` header. The reading for a rule whose header YAML cannot parse
    (``description: [WIP] Go``): to Cursor it is a rule like any other."""
    span = _fenced(text, "---")
    if span is None:
        return None
    data: dict = {}
    lines_of: dict[str, int] = {}
    for i, ln in enumerate(_lines(text.lstrip("\ufeff"))[1 : span[1]], start=2):
        key, sep, value = ln.rstrip("\r").partition(":")
        if not sep or not key.strip() or key != key.lstrip():
            continue
        v: object = value.strip()
        if key.strip() == "alwaysApply" and str(v).lower() in ("true", "false"):
            v = str(v).lower() == "true"
        data[key.strip()] = v
        lines_of[key.strip()] = i
    return data, lines_of, span[1] + 1


def tool_header_change(path: str, before: str, after: str) -> str:
    """Why ``after`` would be read differently by the note's tool than ``before`` ("" when it
    is read the same, or the header is YAML, geode's own to check)."""
    kind = header_kind(path, before)
    if kind not in (CURSOR, TOML, LOGSEQ):
        return ""
    words = KIND_WORDS[kind]
    if header_kind(path, after) != kind:
        return f"the edit would turn {words} into another format"
    if kind == CURSOR:
        if header_text(before, "---") != header_text(after, "---"):
            return f"the edit would change {words}: its lines must stay byte for byte as they are"
        return ""
    if kind == TOML:
        if toml_table(before) != toml_table(after):
            return f"the edit would change what {words} means to Hugo"
        return ""
    if property_lines(before) != property_lines(after):
        return f"the edit would change {words}"
    return ""
