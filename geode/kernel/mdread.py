"""The one markdown reader: a note's body read by a CommonMark parser (markdown-it-py with
mdit-py-plugins), with line numbers from the token stream's line maps.

Why a parser and not patterns over lines: real stores write links inside tables, block quotes
and lists, put parentheses in file names (``[x](spec_(v2).md)``), keep examples in indented
code and HTML comments, write setext headings and footnotes (``[^1]: **Release:** ...`` is not a
reference definition). A line pattern gets each of these wrong, and the backtracking ones took
seconds (or forever) on one long line. markdown-it-py is linear in its input; the wikilink rule
below (not CommonMark) is an inline rule of the same parser, bounded so it stays linear.

What it yields (``Reading``): links and images, reference definitions and undefined
reference-style uses, wikilinks and embeds (``[[target#heading|alias]]``, ``![[x]]``, escaped
pipes in tables), typed relations (``- relates_to [[X]]``), headings (ATX, setext, in quotes and
lists, with a ``{#id}`` attribute), code spans, prose text (for bare paths), ``<a id>`` ids,
``^block`` ids and list items (observations). Nothing inside fenced or indented code blocks or
HTML comments.

Never imported by the hook (it imports a third-party package): only ``geode.kernel.note``
loads it, and lazily.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

#: a wikilink longer than this is not one (keeps the rule's work per position bounded)
_WIKI_MAX = 1000
#: an undefined reference label longer than this is not looked for
_LABEL_MAX = 1000
_HTML_ID_RE = re.compile(r"<a\s[^>]{0,500}?(?:id|name)\s*=\s*[\"']([^\"'\n]{1,200})[\"']", re.I)
_EXTERNAL = ("http:", "https:", "mailto:", "ftp:", "tel:", "data:", "ftps:", "irc:", "news:", "file:")


@dataclass(frozen=True, slots=True)
class MdLink:
    """One link out of the note. ``kind``: markdown | image | reference (a definition
    ``[label]: dest``) | refuse (``[text][label]`` with no definition) | wiki | embed (``![[x]]``)
    | relation. ``target`` is the destination without its ``#anchor``, percent-decoded for
    markdown links; ``raw`` is the destination exactly as written."""

    line: int
    kind: str
    target: str
    anchor: str = ""
    text: str = ""  # the link text, or a wikilink's alias
    relation: str = "links_to"
    raw: str = ""

    @property
    def external(self) -> bool:
        """A URL a store cannot vouch for (``http:``, ``mailto:``, any ``scheme://`` other than
        the ones some flavour resolves: ``memory://``, ``dendron://``)."""
        t = self.raw.lower() if self.kind not in ("wiki", "embed", "relation") else ""
        if not t:
            return False
        if t.startswith(("memory://", "dendron://", "mdc:")):
            return False
        return t.startswith(_EXTERNAL) or "://" in t or t.startswith("//")


@dataclass(frozen=True, slots=True)
class Heading:
    line: int
    level: int
    text: str  # plain text as a reader sees it, without a trailing ``{#id}``
    attr_id: str = ""  # the ``{#id}`` attribute, when written


@dataclass(frozen=True, slots=True)
class Span:
    """A code span or a run of prose text, with its line."""

    line: int
    text: str


@dataclass(slots=True)
class Reading:
    links: list[MdLink] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)
    code_spans: list[Span] = field(default_factory=list)
    texts: list[Span] = field(default_factory=list)  # prose outside links and code that may hold a path
    html_ids: list[str] = field(default_factory=list)
    block_ids: list[str] = field(default_factory=list)
    items: list[Span] = field(default_factory=list)  # first line of each list item
    relation_lines: frozenset[int] = frozenset()
    definitions: frozenset[str] = frozenset()  # reference labels, normalized


# -- the wikilink rule ----------------------------------------------------------------------
def _next_close(state: Any, start: int) -> int:
    """``state.src.find("]]", start)``, remembered per source so a line of ``[[`` repeated does
    not search to its end once per ``[[`` (that would be quadratic)."""
    cache = state.env.setdefault("_wl_close", {})
    key = id(state.src)
    hit = cache.get(key)
    if hit is not None and hit[0] is state.src and hit[1] <= start and (hit[2] < 0 or hit[2] >= start):
        return hit[2]
    found = state.src.find("]]", start)
    cache[key] = (state.src, start, found)
    return found


def wikilink_rule(state: Any, silent: bool) -> bool:
    """Inline rule: ``[[target#anchor|alias]]`` / ``![[embed]]`` -> a ``wikilink`` token (content:
    what is inside the brackets; meta ``embed``). Bounded search for ``]]``: linear on any line.
    The web page's renderer uses it too, so the page links what upkeep reads."""
    src, pos = state.src, state.pos
    if src.startswith("![[", pos):
        embed, start = True, pos + 3
    elif src.startswith("[[", pos):
        embed, start = False, pos + 2
    else:
        return False
    close = _next_close(state, start)
    if close < 0 or close + 2 > state.posMax or close - start > _WIKI_MAX or close == start:
        return False
    inner = src[start:close]
    if "\n" in inner or "[" in inner:
        return False
    if not silent:
        tok = state.push("wikilink", "", 0)
        tok.content = inner
        tok.meta = {"embed": embed}
    state.pos = close + 2
    return True


def _label_end(src: str, start: int, limit: int) -> int:
    """End of a ``[...]`` label that opens at ``start`` (no nesting, one line), or -1."""
    end = src.find("]", start + 1, min(limit, start + 2 + _LABEL_MAX))
    if end < 0 or "\n" in src[start:end] or "[" in src[start + 1 : end]:
        return -1
    return end


def _make_link_rule(original: Any, image: bool) -> Any:
    """The parser's own link (or image) rule, wrapped: a link it makes is marked with whether it
    was written inline and what its destination was as written; a ``[text][label]`` whose label
    has no definition becomes a ``refuse`` token (the old reader reported those; CommonMark
    leaves them as text)."""

    def rule(state: Any, silent: bool) -> bool:
        start = state.pos
        n_before = len(state.tokens)
        ok = original(state, silent)
        src = state.src
        if ok:
            want = "image" if image else "link_open"
            opened = [t for t in state.tokens[n_before:] if t.type == want][:1] if not silent else []
            if opened:
                tok = opened[0]
                raw, inline = "", False
                end = state.pos
                # an inline link ends with ")": its destination follows the last "](" (found from
                # the end: parsing the label a second time would double the rule's cost)
                if src[end - 1] == ")":
                    k = src.rfind("](", start, end)
                    if k >= 0:
                        inline = True
                        p = k + 2
                        while p < end and src[p] in " \t\n":
                            p += 1
                        res = state.md.helpers.parseLinkDestination(src, p, end)
                        if res.ok:
                            raw = src[p : res.pos]
                            if raw.startswith("<") and raw.endswith(">"):
                                raw = raw[1:-1]
                tok.meta = {"inline": inline, "raw": raw}
            return ok
        if image or silent or src[start] != "[":
            return False
        end = _label_end(src, start, state.posMax)
        if end < 0 or end + 1 >= state.posMax or src[end + 1] != "[":
            return False
        end2 = _label_end(src, end + 1, state.posMax)
        if end2 < 0:
            return False
        text = src[start + 1 : end]
        label = src[end + 2 : end2] or text
        if not label.strip() or label.startswith("^") or label.strip() in ("x", "X"):
            return False
        from markdown_it.common.utils import normalizeReference

        if normalizeReference(label) in state.env.get("references", {}):
            return False
        tok = state.push("refuse", "", 0)
        tok.content = label.strip()
        state.pos = end2 + 1
        return True

    return rule


def wikilink_plugin(md: Any) -> None:
    md.inline.ruler.before("link", "wikilink", wikilink_rule)
    for name, image in (("link", False), ("image", True)):
        original = next(r.fn for r in md.inline.ruler.__rules__ if r.name == name)
        md.inline.ruler.at(name, _make_link_rule(original, image))


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt
    from mdit_py_plugins.footnote import footnote_plugin

    md = MarkdownIt("commonmark", {"html": True}).enable("table").use(footnote_plugin).use(wikilink_plugin)
    return md


# -- reading one body ----------------------------------------------------------------------
def split_wiki(inner: str) -> tuple[str, str, str]:
    """``target#anchor|alias`` -> (target, anchor, alias). A ``\\|`` (the escaped pipe Obsidian
    writes inside a table) separates like ``|``."""
    inner = inner.replace("\\|", "|")
    alias = ""
    if "|" in inner:
        inner, alias = inner.split("|", 1)
    anchor = ""
    if "#" in inner:
        inner, anchor = inner.split("#", 1)
    return inner.strip(), anchor.strip(), alias.strip()


def split_dest(dest: str) -> tuple[str, str]:
    """``path#anchor`` -> (path, anchor)."""
    if "#" in dest:
        a, b = dest.split("#", 1)
        return a, b
    return dest, ""


def _is_word(s: str) -> bool:
    return bool(s) and (s[0].isalpha() or s[0] == "_") and all(c.isalnum() or c in "_-" for c in s)


def _attr_id(text: str) -> tuple[str, str]:
    """``Title {#id .cls}`` -> ("Title", "id")."""
    t = text.rstrip()
    if t.endswith("}") and "{" in t:
        i = t.rfind("{")
        inner = t[i + 1 : -1].strip()
        for part in inner.split():
            if part.startswith("#") and len(part) > 1:
                return t[:i].rstrip(), part[1:]
    return text.strip(), ""


def _block_id(content: str) -> str:
    last = content.rstrip().rsplit("\n", 1)[-1].rstrip()
    word = last.rsplit(None, 1)[-1] if last.split() else ""
    if len(word) > 1 and word[0] == "^" and all(c.isalnum() or c == "-" for c in word[1:]):
        return word[1:]
    return ""


def read_markdown(body: str, first_line: int = 1) -> Reading:
    """Read ``body`` (a note's text after its frontmatter); line numbers start at ``first_line``.

    A body written only in the plainest markdown (see ``read_plain``) is read without the parser,
    to the same ``Reading``; any other goes through markdown-it-py (``read_parsed``)."""
    plain = read_plain(body, first_line)
    return plain if plain is not None else read_parsed(body, first_line)


# -- the plain path: the same Reading without the parser, for the plainest bodies ---------------
# Why: markdown-it-py costs about 0.5 ms a note; at 100,000 notes each agent that reads links
# spent a minute in it, on notes that are mostly headings, sentences, wikilinks and relative
# links. A body qualifies only when every line is one of: empty; an ATX heading ``# text``; a
# whole-line HTML comment ``<!-- text -->``; or a paragraph line that starts with an ASCII
# letter and holds only plain text, ``[[target]]``/``[[target|alias]]`` and
# ``[text](relative/path.md#anchor)``. Plain text leaves out every character a CommonMark rule
# (or a plugin here) acts on (``\ ` * _ [ ] < > ! & ~ | ^``), lines never start or end with a
# space, and nothing but ASCII. In such a body no block rule but paragraph, heading and
# html_block can fire (no list, quote, code, table, setext underline, footnote or reference
# definition can start with a letter, ``#`` or ``<!--``), and no inline rule but text, newline,
# the wikilink rule and the link rule. Anything else, or any doubt, takes the parser.
# tests/test_mdread_plain.py compares the two readers on the flavour fixtures, the bench's
# generated store and random bodies built from these pieces and their near misses.
_T = "A-Za-z0-9 \"#$%'()+,\\-./:;=?@{}"  # plain text
_TH = _T.replace("#", "")  # plain text in a heading
_PIECE = re.compile(
    rf"\[\[([{_T}]+(?:\|[{_T}]+)?)\]\]"  # 1: a wikilink's inside
    rf"|\[([{_T}]+)\]\(([A-Za-z0-9._/#-]+)\)"  # 2, 3: a link's text and destination
    rf"|[{_T}]+"  # text
)
_HEADING = re.compile(rf"(#{{1,6}}) ([{_TH.replace(' ', '')}](?:[{_TH}]*[{_TH.replace(' ', '')}])?)")
_COMMENT = re.compile(rf"<!--[{_T}]*-->")


def read_plain(body: str, first_line: int = 1) -> Reading | None:
    """The ``Reading`` of ``body`` when it is written in the plainest markdown (the lines above),
    exactly as ``read_parsed`` gives it; ``None`` for any other body."""
    if not body.isascii():
        return None
    out = Reading()
    para: list[str] = []
    para_at = 0
    for i, ln in enumerate(body.split("\n")):
        if not ln:
            if para and not _plain_paragraph(para, first_line + para_at, out):
                return None
            para = []
            continue
        c = ln[0]
        if c == "#" or c == "<":
            if para and not _plain_paragraph(para, first_line + para_at, out):
                return None
            para = []
            if c == "<":
                if _COMMENT.fullmatch(ln) is None:
                    return None
                out.html_ids.extend(_HTML_ID_RE.findall(ln + "\n"))
                continue
            m = _HEADING.fullmatch(ln)
            if m is None:
                return None
            text = m.group(2)
            shown, attr = _attr_id(text)
            out.headings.append(Heading(first_line + i, len(m.group(1)), shown, attr))
            bid = _block_id(text)
            if bid:
                out.block_ids.append(bid)
            if "/" in text or ".md" in text.lower():
                out.texts.append(Span(first_line + i, text))
            continue
        if not ("a" <= c <= "z" or "A" <= c <= "Z") or ln[-1] == " ":
            return None
        if not para:
            para_at = i
        para.append(ln)
    if para and not _plain_paragraph(para, first_line + para_at, out):
        return None
    return out


def _plain_paragraph(para: list[str], base: int, out: Reading) -> bool:
    """One paragraph's lines into ``out``, as ``_inline`` reads the parser's tokens; False when
    a line is not made of the plain pieces end to end."""
    from urllib.parse import unquote

    md = _parser()
    links: list[MdLink] = []
    texts: list[Span] = []
    for k, ln in enumerate(para):
        line = base + k
        pos = 0
        for m in _PIECE.finditer(ln):
            if m.start() != pos:
                return False
            pos = m.end()
            wiki, label, dest = m.group(1), m.group(2), m.group(3)
            if wiki is not None:
                target, anchor, alias = split_wiki(wiki)
                if target or anchor:
                    links.append(MdLink(line, "wiki", target, anchor, alias, "links_to", target))
            elif label is not None:
                href = md.normalizeLink(dest)
                if not md.validateLink(href):
                    return False
                path, anchor = split_dest(unquote(href))
                links.append(MdLink(line, "markdown", path, anchor, label, raw=dest))
            else:
                text = m.group(0)
                if "/" in text or ".md" in text.lower():
                    texts.append(Span(line, text))
        if pos != len(ln):
            return False
    bid = _block_id("\n".join(para))
    if bid:
        out.block_ids.append(bid)
    out.links.extend(links)
    out.texts.extend(texts)
    return True


def read_parsed(body: str, first_line: int = 1) -> Reading:
    """``read_markdown`` through the parser (markdown-it-py), for any body."""
    from urllib.parse import unquote

    md = _parser()
    env: dict = {}
    tokens = md.parse(body, env)
    out = Reading()
    refs = env.get("references", {})
    if refs:
        out.definitions = frozenset(refs)
    for label, ref in refs.items():
        href = ref.get("href", "")
        m = ref.get("map") or [0, 1]
        raw = _ref_raw(body, m[0], href)
        path, anchor = split_dest(unquote(href))
        out.links.append(MdLink(first_line + m[0], "reference", path, anchor, label, raw=raw))
    in_item = 0
    item_fresh = False
    pending_heading: tuple[int, int] | None = None
    for tok in tokens:
        t = tok.type
        if t == "list_item_open":
            in_item += 1
            item_fresh = True
            continue
        if t == "list_item_close":
            in_item -= 1
            continue
        if t == "heading_open":
            pending_heading = (first_line + (tok.map[0] if tok.map else 0), int(tok.tag[1:]))
            continue
        if t in ("html_block", "html_inline"):
            out.html_ids.extend(_HTML_ID_RE.findall(tok.content))
            continue
        if t != "inline":
            continue
        base = first_line + (tok.map[0] if tok.map else 0)
        if pending_heading is not None:
            text, attr = _attr_id(_plain(tok))
            out.headings.append(Heading(pending_heading[0], pending_heading[1], text, attr))
            pending_heading = None
        bid = _block_id(tok.content)
        if bid:
            out.block_ids.append(bid)
        relation = ""
        if in_item and item_fresh:
            item_fresh = False
            first = tok.content.split("\n", 1)[0]
            out.items.append(Span(base, first))
            word, _sp, rest = first.partition(" ")
            if _is_word(word) and rest.lstrip().startswith("[["):
                relation = word
                out.relation_lines = out.relation_lines | {base}
        _inline(tok.children or [], base, out, relation, unquote)
    return out


def _ref_raw(body: str, line0: int, href: str) -> str:
    """A reference definition's destination as written (for rewrites)."""
    lines = body.split("\n", line0 + 1)
    if line0 >= len(lines):
        return href
    ln = lines[line0]
    i = ln.find("]:")
    if i < 0:
        return href
    rest = ln[i + 2 :].strip()
    if rest.startswith("<"):
        j = rest.find(">")
        return rest[1:j] if j > 0 else rest
    return rest.split(None, 1)[0] if rest else href


def _plain(tok: Any) -> str:
    parts = []
    for c in tok.children or []:
        if c.type in ("text", "code_inline", "html_inline"):
            parts.append(c.content)
        elif c.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif c.type == "wikilink":
            _t, _a, alias = split_wiki(c.content)
            parts.append(alias or c.content)
    return "".join(parts)


def _inline(children: list, base: int, out: Reading, relation: str, unquote: Any) -> None:
    line = base
    depth = 0  # inside a link's text
    link_text: list[str] = []
    open_link: tuple[str, str, str, int] | None = None
    for c in children:
        t = c.type
        if t in ("softbreak", "hardbreak"):
            line += 1
            continue
        if t == "link_open":
            depth += 1
            meta = c.meta or {}
            href = str(c.attrs.get("href", ""))
            open_link = ("markdown" if meta.get("inline") else "", href, str(meta.get("raw", "")), line)
            link_text = []
            continue
        if t == "link_close":
            depth -= 1
            if open_link is not None and open_link[0]:
                _kind, href, raw, ln = open_link
                path, anchor = split_dest(unquote(href))
                out.links.append(MdLink(ln, "markdown", path, anchor, "".join(link_text), raw=raw or href))
            open_link = None
            continue
        if t == "image":
            meta = c.meta or {}
            if meta.get("inline"):
                href = str(c.attrs.get("src", ""))
                path, anchor = split_dest(unquote(href))
                out.links.append(
                    MdLink(line, "image", path, anchor, c.content, "embeds", raw=str(meta.get("raw", "")) or href)
                )
            continue
        if t == "wikilink":
            target, anchor, alias = split_wiki(c.content)
            if not (target or anchor):
                continue
            if relation:
                out.links.append(MdLink(line, "relation", target, anchor, alias, relation, raw=target))
                relation = ""
                continue
            embed = bool((c.meta or {}).get("embed"))
            out.links.append(
                MdLink(
                    line, "embed" if embed else "wiki", target, anchor, alias, "embeds" if embed else "links_to", target
                )
            )
            continue
        if t == "refuse":
            out.links.append(MdLink(line, "refuse", c.content, raw=c.content))
            continue
        if t == "code_inline":
            out.code_spans.append(Span(line, c.content))
            continue
        if t == "text":
            if depth:
                link_text.append(c.content)
            elif "/" in c.content or ".md" in c.content.lower():  # only text that may name a path is kept
                out.texts.append(Span(line, c.content))
            continue
        if t == "html_inline":
            out.html_ids.extend(_HTML_ID_RE.findall(c.content))
